package fxmodule

import (
	"fmt"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/fxmodule/internal/drivers"
)

// buildNodes makes the clients and nodes c describes, with the Dial that
// its driver's package (fxmodule/goredis, …), imported by the program,
// registered. Each node owns its client: the Locker's Close closes the
// node, which closes the client. On error, Dial has closed what it made.
//
// rueidis and valkey-go clients connect when made: their Dial waits one
// node timeout at most, and the node of a client still connecting (a
// hung server) waits for it within each call, so the start-up check finds
// it within PingTimeout.
func buildNodes(c *Config) ([]core.Node, error) {
	if len(c.Addrs) == 0 {
		return nil, invalidConfig(fmt.Errorf("fxmodule: Config.Addrs is empty and no node was contributed to group %q: give the servers' addresses", NodesGroup))
	}
	dial, ok := drivers.Lookup(c.driver())
	if !ok {
		return nil, invalidConfig(fmt.Errorf("fxmodule: Config.Driver: driver %q is not linked into this program: import _ \"github.com/quorumlock/quorumlock/fxmodule/%s\"", c.driver(), c.driver()))
	}
	nodes, err := dial(drivers.Settings{Addrs: c.Addrs, Username: c.Username, Password: c.Password,
		TLS: c.TLS, TLSConfig: c.TLSConfig, Cluster: c.Cluster})
	if err != nil {
		return nil, fmt.Errorf("fxmodule: %w", err)
	}
	return nodes, nil
}
