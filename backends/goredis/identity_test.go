package goredis_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
)

// One server is one vote whatever database Options.DB selects.
func TestOneServerOneVoteAcrossDatabases(t *testing.T) {
	redistest.RunDatabases(t, func(t *testing.T, addr string, db int) core.Node {
		o := goredis.ClientOptions(addr)
		o.DB = db
		c := redis.NewClient(o)
		t.Cleanup(func() { assert.NoError(t, c.Close()) })
		n, err := goredis.New(c)
		require.NoError(t, err)
		return n
	})
}
