package rueidis_test

import (
	"crypto/tls"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	qlrueidis "github.com/quorumlock/quorumlock/backends/rueidis"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/internal/optiontest"
)

// Every With function returns an Option or a DialOption that shows itself
// as written, and New and Dial skip a nil one.
func TestOptionsShowAsWritten(t *testing.T) {
	t.Parallel()
	optiontest.Check(t, ".", map[string]fmt.Stringer{
		"WithName":         qlrueidis.WithName("a"),
		"WithCloseClient":  qlrueidis.WithCloseClient(true),
		"WithCredentials":  qlrueidis.WithCredentials("u", "p"),
		"WithTLS":          qlrueidis.WithTLS(true),
		"WithTLSConfig":    qlrueidis.WithTLSConfig(&tls.Config{}),
		"WithCluster":      qlrueidis.WithCluster(true),
		"WithClientOption": qlrueidis.WithClientOption(func(*rueidis.ClientOption) {}),
		"WithConnectWait":  qlrueidis.WithConnectWait(time.Second),
	})
	assert.Equal(t, "WithCredentials(...)", qlrueidis.WithCredentials("u", "secret").String(), "credentials are elided")

	srv := redistest.StartTestServer(t)
	nodes, closeAll, err := qlrueidis.Dial([]string{srv.Addr()}, nil, qlrueidis.WithTLS(false), nil)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, closeAll()) })
	require.Len(t, nodes, 1)
	client := nodes[0].(*qlrueidis.Node).Client().(rueidis.Client)
	node, err := qlrueidis.New(client, nil, qlrueidis.WithName("a"), nil)
	require.NoError(t, err)
	assert.Equal(t, "a", node.String())
}
