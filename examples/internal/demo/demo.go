package demo

import (
	"context"
	"fmt"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/quorumlock/quorumlock/core/driver"
)

// ParseAddrs splits REDIS_ADDRS ("host:port,host:port") into addresses,
// ignoring blanks. An empty value means: use the embedded servers.
func ParseAddrs(env string) []string {
	var addrs []string
	for a := range strings.SplitSeq(env, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// Plural returns n and noun, with an s unless n is 1: "1 node", "3 nodes".
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// Quiet is a go-redis logger (redis.SetLogger(demo.Quiet{})) that drops
// go-redis's own log lines, about a refused dial or a node taken down on
// purpose: the programs report such errors themselves.
type Quiet struct{}

// Printf drops the line.
func (Quiet) Printf(context.Context, string, ...any) {}

// Servers are the Redis servers a program runs on: embedded miniredis
// servers (in-process, reached over real loopback TCP), or the Redis
// masters of REDIS_ADDRS.
type Servers struct {
	embedded []*miniredis.Miniredis // nil when running on given addresses
	addrs    []string
}

// Start starts n embedded miniredis servers when addrs is empty; otherwise
// it starts nothing and the servers are those at addrs. On error it closes
// whatever it started.
func Start(addrs []string, n int) (*Servers, error) {
	s := &Servers{addrs: addrs}
	if len(addrs) > 0 {
		return s, nil
	}
	for range n {
		m, err := miniredis.Run()
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("starting an embedded server: %w", err)
		}
		// A server started here holds no lock: adopt it for the restart
		// guard, which would otherwise keep it out for a TTL (see
		// core.Locker.Adopt; real servers you name are left to you).
		if err := m.Set(driver.BirthKey, "0"); err != nil {
			m.Close()
			s.Close()
			return nil, fmt.Errorf("adopting an embedded server: %w", err)
		}
		s.embedded = append(s.embedded, m)
		s.addrs = append(s.addrs, m.Addr())
	}
	return s, nil
}

// Addrs returns the servers' addresses, in order. The caller must not
// modify the slice.
func (s *Servers) Addrs() []string { return s.addrs }

// Embedded reports whether the servers are embedded miniredis servers,
// started by Start.
func (s *Servers) Embedded() bool { return s.embedded != nil }

// Where says which servers these are, for a program's header:
// "5 embedded miniredis servers", or
// "3 Redis servers from REDIS_ADDRS (host:port, host:port, host:port)".
func (s *Servers) Where() string {
	if s.Embedded() {
		return Plural(len(s.embedded), "embedded miniredis server")
	}
	return fmt.Sprintf("%s from REDIS_ADDRS (%s)", Plural(len(s.addrs), "Redis server"), strings.Join(s.addrs, ", "))
}

// Stop stops embedded server i: from then on, connections to it are
// refused. It panics unless the servers are embedded.
func (s *Servers) Stop(i int) {
	s.embedded[i].Close()
}

// Close stops every embedded server; servers at given addresses are left
// alone. Closing twice, or after Stop, is harmless.
func (s *Servers) Close() {
	for _, m := range s.embedded {
		m.Close()
	}
}
