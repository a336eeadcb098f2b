package safety

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core/driver"
)

// Rig is N redis-servers, each behind a Proxy that Addrs lists, and each
// client's own proxies (ClientAddrs), so that a fault can cut a node off
// from some clients only (the majorities ring). A fault on a node hits
// every proxy in front of it.
type Rig struct {
	Servers []*redistest.Server
	Proxies []*Proxy // one per node, shared by every user of Addrs

	mu      sync.Mutex
	clients [][]*Proxy // clients[c][n]: client c's own proxy to node n
}

// StartRig starts n servers (adopted for the restart guard, as new
// servers that hold no lock) and a proxy in front of each.
func StartRig(ctx context.Context, n int) (*Rig, error) {
	r := &Rig{}
	for range n {
		s, err := redistest.StartServer(ctx)
		if err != nil {
			r.Close()
			return nil, err
		}
		r.Servers = append(r.Servers, s)
		p, err := StartProxy(s.Addr())
		if err != nil {
			r.Close()
			return nil, err
		}
		r.Proxies = append(r.Proxies, p)
	}
	return r, nil
}

// Addrs are the shared proxies' addresses, one per node.
func (r *Rig) Addrs() []string {
	out := make([]string, len(r.Proxies))
	for i, p := range r.Proxies {
		out[i] = p.Addr()
	}
	return out
}

// ClientAddrs are client c's own proxies' addresses, one per node,
// started on first use: the majorities ring cuts a client's own links
// only.
func (r *Rig) ClientAddrs(c int) ([]string, error) {
	if c < 0 {
		return nil, fmt.Errorf("safety: client %d", c)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.clients) <= c {
		r.clients = append(r.clients, nil)
	}
	if r.clients[c] == nil {
		ps := make([]*Proxy, 0, len(r.Servers))
		for _, s := range r.Servers {
			p, err := StartProxy(s.Addr())
			if err != nil {
				for _, p := range ps {
					_ = p.Close()
				}
				return nil, err
			}
			ps = append(ps, p)
		}
		r.clients[c] = ps
	}
	out := make([]string, len(r.clients[c]))
	for i, p := range r.clients[c] {
		out[i] = p.Addr()
	}
	return out, nil
}

// nodeProxies are every proxy in front of node n.
func (r *Rig) nodeProxies(n int) []*Proxy {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []*Proxy{r.Proxies[n]}
	for _, ps := range r.clients {
		if ps != nil {
			out = append(out, ps[n])
		}
	}
	return out
}

// eachProxy applies f to every proxy in front of node n.
func (r *Rig) eachProxy(n int, f func(*Proxy) error) error {
	var errs []error
	for _, p := range r.nodeProxies(n) {
		errs = append(errs, f(p))
	}
	return errors.Join(errs...)
}

// RingReach says whether client c reaches node n in the majorities ring
// over nodes nodes: each client reaches a majority of them, nodes c,
// c+1, ..., c+quorum-1 (mod nodes), so that no two neighbouring clients
// see the same majority yet every two majorities share a node.
func RingReach(c, n, nodes int) bool {
	if nodes <= 0 || c < 0 || n < 0 || n >= nodes {
		return false
	}
	quorum := nodes/2 + 1
	return (n-c%nodes+nodes)%nodes < quorum
}

// Ring partitions (on) or heals (off) the majorities ring: every client
// that has its own proxies loses the nodes outside its majority
// (RingReach), as Partition does; the shared proxies are untouched.
func (r *Rig) Ring(on bool) error {
	r.mu.Lock()
	clients := append([][]*Proxy(nil), r.clients...)
	r.mu.Unlock()
	var errs []error
	for c, ps := range clients {
		for n, p := range ps {
			switch {
			case !on:
				errs = append(errs, p.Heal())
			case !RingReach(c, n, len(ps)):
				errs = append(errs, p.Partition())
			}
		}
	}
	return errors.Join(errs...)
}

// Close stops the proxies and the servers.
func (r *Rig) Close() error {
	var errs []error
	r.mu.Lock()
	for _, ps := range r.clients {
		for _, p := range ps {
			errs = append(errs, p.Close())
		}
	}
	r.clients = nil
	r.mu.Unlock()
	for _, p := range r.Proxies {
		errs = append(errs, p.Close())
	}
	for _, s := range r.Servers {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// LockKeys counts, on every server directly, the keys that start with
// prefix (lock keys) and the readers sets and writer marks of such keys
// and permit slots (driver.ReadersKey, driver.WriterKey, driver.PermitKey,
// for keys without a hash tag): all
// expire. Fencing counters and wait queues, which need not, are not
// counted.
func (r *Rig) LockKeys(ctx context.Context, prefix string) (int, error) {
	total := 0
	for _, s := range r.Servers {
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
		for _, pattern := range []string{prefix + "*", "{" + prefix + "*}" + driver.ReadersSuffix, "{" + prefix + "*}" + driver.WriterSuffix, "{" + prefix + "*}" + driver.PermitSuffix + "*"} {
			keys, err := c.Keys(ctx, pattern).Result()
			if err != nil {
				c.Close()
				return 0, fmt.Errorf("safety: keys on %s: %w", s.Addr(), err)
			}
			total += len(keys)
		}
		c.Close()
	}
	return total, nil
}
