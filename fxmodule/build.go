package fxmodule

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	redigoredis "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/backends/redigo"
	qlrueidis "github.com/quorumlock/quorumlock/backends/rueidis"
	"github.com/quorumlock/quorumlock/core"
)

// buildNodes makes the clients and nodes c describes. Each node owns its
// client: the Locker's Close closes the node, which closes the client.
// On error, the clients already made are closed.
func buildNodes(c *Config) ([]core.Node, error) {
	if len(c.Addrs) == 0 {
		return nil, invalidConfig(fmt.Errorf("fxmodule: Config.Addrs is empty and no node was contributed to group %q: give the servers' addresses", NodesGroup))
	}
	addrs := make([]string, len(c.Addrs))
	for i, a := range c.Addrs {
		addrs[i] = strings.TrimSpace(a)
	}
	if c.Cluster {
		node, err := buildNode(c, addrs...)
		if err != nil {
			return nil, err
		}
		return []core.Node{node}, nil
	}
	// In parallel: a rueidis client connects when it is made, and a server
	// that accepts connections but does not answer holds that up for the
	// client's dial timeout.
	nodes := make([]core.Node, len(addrs))
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Go(func() { nodes[i], errs[i] = buildNode(c, addr) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, n := range nodes {
			if n != nil {
				_ = n.Close()
			}
		}
		return nil, err
	}
	return nodes, nil
}

// tlsConfig returns the TLS configuration of a client of addr, or nil for
// plain TCP.
func (c *Config) tlsConfig(addr string) *tls.Config {
	switch {
	case c.TLSConfig != nil:
		return c.TLSConfig.Clone()
	case c.TLS:
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
		return cfg
	}
	return nil
}

// buildNode makes one node: over addrs[0], or over the cluster that addrs
// belong to when c.Cluster is set.
func buildNode(c *Config, addrs ...string) (core.Node, error) {
	switch c.driver() {
	case DriverGoRedis:
		var client interface {
			goredis.Client
			Close() error
		}
		if c.Cluster {
			o := goredis.ClusterOptions(addrs...)
			o.Username, o.Password, o.TLSConfig = c.Username, c.Password, c.tlsConfig(addrs[0])
			client = redis.NewClusterClient(o)
		} else {
			o := goredis.ClientOptions(addrs[0])
			o.Username, o.Password, o.TLSConfig = c.Username, c.Password, c.tlsConfig(addrs[0])
			client = redis.NewClient(o)
		}
		node, err := goredis.New(client)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("fxmodule: goredis node %s: %w", strings.Join(addrs, ","), err), client.Close())
		}
		return &ownedGoRedis{Node: node, close: client.Close}, nil

	case DriverRedigo:
		var dial []redigoredis.DialOption
		if c.Username != "" {
			dial = append(dial, redigoredis.DialUsername(c.Username))
		}
		if c.Password != "" {
			dial = append(dial, redigoredis.DialPassword(c.Password))
		}
		if cfg := c.tlsConfig(addrs[0]); cfg != nil {
			dial = append(dial, redigoredis.DialUseTLS(true), redigoredis.DialTLSConfig(cfg))
		}
		pool := redigo.NewPool(addrs[0], dial...)
		node, err := redigo.New(pool, redigo.WithName(addrs[0]))
		if err != nil {
			return nil, errors.Join(fmt.Errorf("fxmodule: redigo node %s: %w", addrs[0], err), pool.Close())
		}
		return &ownedRedigo{Node: node, close: pool.Close}, nil

	case DriverRueidis:
		o := qlrueidis.ClientOption(addrs...)
		o.Username, o.Password, o.TLSConfig = c.Username, c.Password, c.tlsConfig(addrs[0])
		// Independent masters are single servers: no cluster detection,
		// and a client even when the server is down at start (it
		// reconnects on use), so that TolerateDown can apply.
		o.ForceSingleClient = !c.Cluster
		client, err := rueidis.NewClient(o)
		if client == nil {
			return nil, fmt.Errorf("fxmodule: rueidis client for %s: %w", strings.Join(addrs, ","), err)
		}
		// With ForceSingleClient, err is the first dial's failure: the
		// start-up check reports the node.
		opts := []qlrueidis.Option{qlrueidis.CloseClient()}
		if !c.Cluster {
			opts = append(opts, qlrueidis.WithName(addrs[0]))
		}
		node, err := qlrueidis.New(client, opts...)
		if err != nil {
			client.Close()
			return nil, fmt.Errorf("fxmodule: rueidis node %s: %w", strings.Join(addrs, ","), err)
		}
		return node, nil
	}
	return nil, invalidConfig(fmt.Errorf("fxmodule: Config.Driver: unknown driver %q", c.Driver))
}

// ownedGoRedis is a goredis node that closes its client: the module made
// the client, and nobody else holds it. Embedding the concrete node keeps
// its capabilities (core.Batcher, core.Watcher).
type ownedGoRedis struct {
	*goredis.Node
	close func() error
}

// Close closes the client.
func (n *ownedGoRedis) Close() error { return errors.Join(n.Node.Close(), n.close()) }

// ownedRedigo is a redigo node that closes its pool, as ownedGoRedis.
type ownedRedigo struct {
	*redigo.Node
	close func() error
}

// Close closes the pool.
func (n *ownedRedigo) Close() error { return errors.Join(n.Node.Close(), n.close()) }

var (
	_ core.Batcher = (*ownedGoRedis)(nil)
	_ core.Watcher = (*ownedGoRedis)(nil)
	_ core.Batcher = (*ownedRedigo)(nil)
	_ core.Watcher = (*ownedRedigo)(nil)
)
