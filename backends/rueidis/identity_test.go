package rueidis_test

import (
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	qlrueidis "github.com/quorumlock/quorumlock/backends/rueidis"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
)

// One server is one vote whatever database SelectDB selects.
func TestOneServerOneVoteAcrossDatabases(t *testing.T) {
	redistest.RunDatabases(t, func(t *testing.T, addr string, db int) core.Node {
		o := qlrueidis.ClientOption(addr)
		o.SelectDB = db
		c, err := rueidis.NewClient(o)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		n, err := qlrueidis.New(c)
		require.NoError(t, err)
		return n
	})
}
