package redigo_test

import (
	"testing"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/redigo"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
)

// One server is one vote whatever database DialDatabase selects.
func TestOneServerOneVoteAcrossDatabases(t *testing.T) {
	redistest.RunDatabases(t, func(t *testing.T, addr string, db int) core.Node {
		n, err := redigo.New(redigo.NewPool(addr, redis.DialDatabase(db)), redigo.WithCloseClient(true))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, n.Close()) })
		return n
	})
}
