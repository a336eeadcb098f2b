package nodeutil

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/quorumlock/quorumlock/core"
)

// CheckAddrs trims the addresses given to a backend's Dial (pkg names the
// backend in errors) and refuses a list that does not name distinct
// servers as "host:port", with an error matching core.ErrInvalidArgument
// that quotes the value given.
func CheckAddrs(pkg string, addrs []string) ([]string, error) {
	if len(addrs) == 0 {
		return nil, fmt.Errorf(`%w: %s: Dial: no addresses: give one "host:port" per server`, core.ErrInvalidArgument, pkg)
	}
	out := make([]string, len(addrs))
	seen := make(map[string]int, len(addrs))
	for i, raw := range addrs {
		a := strings.TrimSpace(raw)
		if a == "" {
			return nil, fmt.Errorf("%w: %s: Dial: address %d is empty (%q)", core.ErrInvalidArgument, pkg, i, raw)
		}
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return nil, fmt.Errorf(`%w: %s: Dial: address %q %s: want "host:port", such as "10.0.0.1:6379"`,
				core.ErrInvalidArgument, pkg, raw, addrFault(err))
		}
		if j, dup := seen[a]; dup {
			return nil, fmt.Errorf("%w: %s: Dial: address %q is given twice (addresses %d and %d): one server would count twice",
				core.ErrInvalidArgument, pkg, a, j, i)
		}
		seen[a], out[i] = i, a
	}
	return out, nil
}

// addrFault says what is wrong with an address that net.SplitHostPort
// refused (err), or whose port is empty (nil err).
func addrFault(err error) string {
	var ae *net.AddrError
	if err == nil || errors.As(err, &ae) && ae.Err == "missing port in address" {
		return "has no port"
	}
	if errors.As(err, &ae) {
		return "is not host:port (" + ae.Err + ")"
	}
	return "is not host:port"
}

// TLSFor returns the TLS configuration of a client of the server at addr:
// a clone of cfg when it is set; with on alone, TLS 1.2 or later with the
// server name taken from addr's host; else nil, plain TCP.
func TLSFor(cfg *tls.Config, on bool, addr string) *tls.Config {
	switch {
	case cfg != nil:
		return cfg.Clone()
	case on:
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
		return cfg
	}
	return nil
}

// CloseAll returns a function that closes nodes (each a node that closes
// its own client once), joining their errors: Dial's closeAll.
func CloseAll(nodes []core.Node) func() error {
	return func() error {
		var errs []error
		for _, n := range nodes {
			errs = append(errs, n.Close())
		}
		return errors.Join(errs...)
	}
}
