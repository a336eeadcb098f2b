package valkey_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	qlvalkey "github.com/quorumlock/quorumlock/backends/valkey"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
)

// One server is one vote whatever database SelectDB selects.
func TestOneServerOneVoteAcrossDatabases(t *testing.T) {
	redistest.RunDatabases(t, func(t *testing.T, addr string, db int) core.Node {
		o := qlvalkey.ClientOption(addr)
		o.SelectDB = db
		c, err := valkey.NewClient(o)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		n, err := qlvalkey.New(c)
		require.NoError(t, err)
		return n
	})
}
