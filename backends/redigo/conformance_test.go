package redigo_test

import (
	"testing"

	"github.com/quorumlock/quorumlock/backends/redigo"
	"github.com/quorumlock/quorumlock/conformance"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
)

// factory builds a redigo node for a server, as a user would.
func factory(addr string) (core.Node, func() error, error) {
	pool := redigo.NewPool(addr)
	node, err := redigo.New(pool, redigo.WithName(addr))
	return node, pool.Close, err
}

func TestConformance(t *testing.T) {
	t.Run("redigo/single", func(t *testing.T) {
		conformance.Run(t, redistest.Harness(factory))
	})
}
