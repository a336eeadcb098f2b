package fxmodule

import (
	"fmt"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/backends/redigo"
	qlrueidis "github.com/quorumlock/quorumlock/backends/rueidis"
	qlvalkey "github.com/quorumlock/quorumlock/backends/valkey"
	"github.com/quorumlock/quorumlock/core"
)

// buildNodes makes the clients and nodes c describes, with the driver's
// Dial. Each node owns its client: the Locker's Close closes the node,
// which closes the client. On error, Dial has closed what it made.
//
// A rueidis client connects when it is made: Dial waits for the clients
// at most the start-up check's PingTimeout, which a client still
// connecting then would fail anyway; its node waits for it within each
// call.
func buildNodes(c *Config) ([]core.Node, error) {
	if len(c.Addrs) == 0 {
		return nil, invalidConfig(fmt.Errorf("fxmodule: Config.Addrs is empty and no node was contributed to group %q: give the servers' addresses", NodesGroup))
	}
	var (
		nodes []core.Node
		err   error
	)
	switch c.driver() {
	case DriverGoRedis:
		opts := []goredis.DialOption{goredis.WithCredentials(c.Username, c.Password)}
		if c.TLS || c.TLSConfig != nil {
			opts = append(opts, goredis.WithTLS(true), goredis.WithTLSConfig(c.TLSConfig))
		}
		if c.Cluster {
			opts = append(opts, goredis.WithCluster(true))
		}
		nodes, _, err = goredis.Dial(c.Addrs, opts...)
	case DriverRedigo:
		opts := []redigo.DialOption{redigo.WithCredentials(c.Username, c.Password)}
		if c.TLS || c.TLSConfig != nil {
			opts = append(opts, redigo.WithTLS(true), redigo.WithTLSConfig(c.TLSConfig))
		}
		nodes, _, err = redigo.Dial(c.Addrs, opts...)
	case DriverRueidis:
		opts := []qlrueidis.DialOption{qlrueidis.WithCredentials(c.Username, c.Password), qlrueidis.WithConnectWait(c.pingTimeout())}
		if c.TLS || c.TLSConfig != nil {
			opts = append(opts, qlrueidis.WithTLS(true), qlrueidis.WithTLSConfig(c.TLSConfig))
		}
		if c.Cluster {
			opts = append(opts, qlrueidis.WithCluster(true))
		}
		nodes, _, err = qlrueidis.Dial(c.Addrs, opts...)
	case DriverValkey:
		// valkey.Dial waits for its clients one node timeout at most; the
		// start-up check then waits for a client still connecting within
		// PingTimeout, through its node.
		opts := []qlvalkey.DialOption{qlvalkey.WithCredentials(c.Username, c.Password), qlvalkey.WithCluster(c.Cluster)}
		if c.TLS || c.TLSConfig != nil {
			opts = append(opts, qlvalkey.WithTLS(true), qlvalkey.WithTLSConfig(c.TLSConfig))
		}
		nodes, _, err = qlvalkey.Dial(c.Addrs, opts...)
	default:
		return nil, invalidConfig(fmt.Errorf("fxmodule: Config.Driver: unknown driver %q", c.Driver))
	}
	if err != nil {
		return nil, fmt.Errorf("fxmodule: %w", err)
	}
	return nodes, nil
}
