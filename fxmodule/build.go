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
// rueidis and valkey-go clients connect when made: their Dial waits one
// node timeout at most, and the node of a client still connecting (a
// hung server) waits for it within each call, so the start-up check finds
// it within PingTimeout.
func buildNodes(c *Config) ([]core.Node, error) {
	if len(c.Addrs) == 0 {
		return nil, invalidConfig(fmt.Errorf("fxmodule: Config.Addrs is empty and no node was contributed to group %q: give the servers' addresses", NodesGroup))
	}
	var (
		nodes []core.Node
		err   error
	)
	// WithTLSConfig turns TLS on when given a configuration, and a nil one
	// changes nothing, as Config.TLSConfig means.
	switch c.driver() {
	case DriverGoRedis:
		nodes, _, err = goredis.Dial(c.Addrs, goredis.WithCredentials(c.Username, c.Password),
			goredis.WithTLS(c.TLS), goredis.WithTLSConfig(c.TLSConfig), goredis.WithCluster(c.Cluster))
	case DriverRedigo:
		nodes, _, err = redigo.Dial(c.Addrs, redigo.WithCredentials(c.Username, c.Password),
			redigo.WithTLS(c.TLS), redigo.WithTLSConfig(c.TLSConfig))
	case DriverRueidis:
		nodes, _, err = qlrueidis.Dial(c.Addrs, qlrueidis.WithCredentials(c.Username, c.Password),
			qlrueidis.WithTLS(c.TLS), qlrueidis.WithTLSConfig(c.TLSConfig), qlrueidis.WithCluster(c.Cluster))
	case DriverValkey:
		nodes, _, err = qlvalkey.Dial(c.Addrs, qlvalkey.WithCredentials(c.Username, c.Password),
			qlvalkey.WithTLS(c.TLS), qlvalkey.WithTLSConfig(c.TLSConfig), qlvalkey.WithCluster(c.Cluster))
	default:
		return nil, invalidConfig(fmt.Errorf("fxmodule: Config.Driver: unknown driver %q", c.Driver))
	}
	if err != nil {
		return nil, fmt.Errorf("fxmodule: %w", err)
	}
	return nodes, nil
}
