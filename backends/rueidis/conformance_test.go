package rueidis_test

import (
	"testing"
	"time"

	"github.com/redis/rueidis"

	qlrueidis "github.com/quorumlock/quorumlock/backends/rueidis"
	"github.com/quorumlock/quorumlock/conformance"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
)

// single builds a rueidis node for one server, as a user would.
func single(addr string) (core.Node, func() error, error) {
	client, err := rueidis.NewClient(qlrueidis.ClientOption(addr))
	if err != nil {
		return nil, nil, err
	}
	node, err := qlrueidis.New(client)
	return node, func() error { client.Close(); return nil }, err
}

// cluster builds a rueidis node for a Redis Cluster, as a user would:
// the same options, with the addresses of any of its masters; rueidis
// finds out the topology itself. The node owns the client (WithCloseClient):
// a closed rueidis cluster client reconnects within a second or so (see
// WithCloseClient), which the suite's closed-client check would take for a
// node that ignores Close.
func cluster(addrs []string) (core.Node, func() error, error) {
	client, err := rueidis.NewClient(qlrueidis.ClientOption(addrs...))
	if err != nil {
		return nil, nil, err
	}
	node, err := qlrueidis.New(client, qlrueidis.WithCloseClient(true))
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	return node, node.Close, nil
}

func TestConformance(t *testing.T) {
	t.Run("rueidis/single", func(t *testing.T) {
		conformance.Run(t, redistest.Harness(single))
	})
	t.Run("rueidis/cluster", func(t *testing.T) {
		conformance.Run(t, redistest.ClusterHarness(cluster), conformance.WithSizes(1, 3),
			// A closed rueidis cluster client refreshes its topology once
			// more, after a random delay of up to a second, and closes the
			// connections that refresh replaced five seconds later.
			conformance.WithLeakGrace(10*time.Second))
	})
}
