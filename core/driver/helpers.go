package driver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// ErrInvalidArgument is core.ErrInvalidArgument: bad input, such as an
// empty key or a malformed address. Retrying cannot help.
var ErrInvalidArgument = errors.New("quorumlock: invalid argument")

// Resubscription pacing of a Watch whose connection was lost: the first
// pause before subscribing again, doubled after each failure up to the
// longest. See Backoff.
const (
	MinBackoff = 50 * time.Millisecond
	MaxBackoff = 2 * time.Second
)

// Backoff paces a Watch's attempts to subscribe again after a lost
// connection: from MinBackoff, doubling up to MaxBackoff. The zero value is
// ready to use; it is not safe for concurrent use.
type Backoff struct{ next time.Duration }

// Reset makes the next pause MinBackoff again (after a subscription was
// confirmed).
func (b *Backoff) Reset() { b.next = 0 }

// Wait pauses for the next delay and reports true, or reports false as
// soon as done is closed.
func (b *Backoff) Wait(done <-chan struct{}) bool {
	if b.next == 0 {
		b.next = MinBackoff
	}
	t := time.NewTimer(b.next)
	defer t.Stop()
	b.next = min(2*b.next, MaxBackoff)
	select {
	case <-done:
		return false
	case <-t.C:
		return true
	}
}

// FailAll gives every call err as its error and no reply.
func FailAll(calls []Call, err error) {
	for i := range calls {
		calls[i].Reply, calls[i].Err = nil, err
	}
}

// EvalEach runs calls one by one through n's Eval (a call with Source) or
// EvalSHA, in order: the batch of a node whose client cannot pipeline.
// Once ctx has ended, the calls left fail with its error unsent.
func EvalEach(ctx context.Context, n Node, calls []Call) {
	for i := range calls {
		if err := ctx.Err(); err != nil {
			FailAll(calls[i:], err)
			return
		}
		c := &calls[i]
		if c.Source != "" {
			c.Reply, c.Err = n.Eval(ctx, c.Source, c.Keys, c.Args)
		} else {
			c.Reply, c.Err = n.EvalSHA(ctx, c.SHA, c.Keys, c.Args)
		}
	}
}

// LuaReply turns a script's reply as a RESP3 client decodes it into the
// form EvalSHA promises: Lua's false (a RESP3 false) becomes nil and true
// 1, as in RESP2, in arrays too (changed in place).
func LuaReply(v any) any {
	switch x := v.(type) {
	case bool:
		if x {
			return int64(1)
		}
		return nil
	case []any:
		for i := range x {
			x[i] = LuaReply(x[i])
		}
	}
	return v
}

// IsNil reports whether v is nil or holds a nil pointer, interface, map,
// func, slice or channel: a typed nil client handed to a constructor must
// be refused, not dereferenced on first use.
func IsNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Func, reflect.Slice, reflect.Chan:
		return rv.IsNil()
	}
	return false
}

// CheckAddrs trims the addresses given to a backend's Dial (pkg names the
// backend in errors) and refuses a list that does not name distinct
// servers as "host:port", with an error matching ErrInvalidArgument that
// quotes the value given.
func CheckAddrs(pkg string, addrs []string) ([]string, error) {
	if len(addrs) == 0 {
		return nil, fmt.Errorf(`%w: %s: Dial: no addresses: give one "host:port" per server`, ErrInvalidArgument, pkg)
	}
	out := make([]string, len(addrs))
	seen := make(map[string]int, len(addrs))
	for i, raw := range addrs {
		a := strings.TrimSpace(raw)
		if a == "" {
			return nil, fmt.Errorf("%w: %s: Dial: address %d is empty (%q)", ErrInvalidArgument, pkg, i, raw)
		}
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return nil, fmt.Errorf(`%w: %s: Dial: address %q %s: want "host:port", such as "10.0.0.1:6379"`,
				ErrInvalidArgument, pkg, raw, addrFault(err))
		} else if p, err := strconv.Atoi(port); err == nil && (p < 1 || p > 65535) {
			return nil, fmt.Errorf("%w: %s: Dial: address %q has port %d, outside 1-65535", ErrInvalidArgument, pkg, raw, p)
		}
		if j, dup := seen[a]; dup {
			return nil, fmt.Errorf("%w: %s: Dial: address %q is given twice (addresses %d and %d): one server would count twice",
				ErrInvalidArgument, pkg, a, j, i)
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
// nil (plain TCP) unless on; then a clone of cfg when it is set, else TLS
// 1.2 or later. Either way the server name is taken from addr's host when
// the configuration names none, as crypto/tls.Dial does: a configuration
// that only adds a CA or a client certificate verifies each server by its
// own address.
func TLSFor(cfg *tls.Config, on bool, addr string) *tls.Config {
	switch {
	case !on:
		return nil
	case cfg != nil:
		cfg = cfg.Clone()
	default:
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if host, _, err := net.SplitHostPort(addr); err == nil && cfg.ServerName == "" {
		cfg.ServerName = host
	}
	return cfg
}

// CloseAll returns a function that closes nodes (each a node that closes
// its own client once), joining their errors: a Dial's closeAll.
func CloseAll(nodes []Node) func() error {
	return func() error {
		var errs []error
		for _, n := range nodes {
			errs = append(errs, n.Close())
		}
		return errors.Join(errs...)
	}
}

// clusterReplies are the first words of the error replies that only a
// Redis Cluster member sends: MOVED, ASK and CROSSSLOT.
var clusterReplies = []string{"MOVED ", "ASK ", "CROSSSLOT "}

// ClusterMemberError is the error of a node over a client of one server
// when that server is a Redis Cluster member: it answered with a cluster
// redirection, which such a client cannot follow. It matches
// ErrInvalidArgument and, with errors.As, the driver's error.
type ClusterMemberError struct {
	// Err is the server's reply, as the driver returned it.
	Err error
	// Advice says how to build a node over a whole cluster with the
	// node's driver.
	Advice string
}

// Error starts with the server's reply ("MOVED 3999 127.0.0.1:7002"),
// then says what is wrong and what to do.
func (e *ClusterMemberError) Error() string {
	return e.Err.Error() + ": this server is a Redis Cluster member, not an independent master, " +
		"and a client of one server cannot follow the cluster's redirections; a whole Redis Cluster is one Redlock node: " + e.Advice
}

// Unwrap returns ErrInvalidArgument and the driver's error.
func (e *ClusterMemberError) Unwrap() []error { return []error{ErrInvalidArgument, e.Err} }

// ExplainCluster returns err as a *ClusterMemberError with advice when it
// is a Redis Cluster reply (MOVED, ASK or CROSSSLOT), else err unchanged.
// Call it only for nodes over a client of one server.
func ExplainCluster(err error, advice string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, prefix := range clusterReplies {
		if strings.HasPrefix(msg, prefix) {
			return &ClusterMemberError{Err: err, Advice: advice}
		}
	}
	return err
}
