package valkey_test

import (
	"crypto/tls"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	qlvalkey "github.com/quorumlock/quorumlock/backends/valkey"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/internal/optiontest"
)

// Every With function returns an Option or a DialOption that shows itself
// as written, and New and Dial skip a nil one.
func TestOptionsShowAsWritten(t *testing.T) {
	t.Parallel()
	optiontest.Check(t, ".", map[string]fmt.Stringer{
		"WithName":         qlvalkey.WithName("a"),
		"WithCloseClient":  qlvalkey.WithCloseClient(true),
		"WithCredentials":  qlvalkey.WithCredentials("u", "p"),
		"WithTLS":          qlvalkey.WithTLS(true),
		"WithTLSConfig":    qlvalkey.WithTLSConfig(&tls.Config{}),
		"WithCluster":      qlvalkey.WithCluster(true),
		"WithClientOption": qlvalkey.WithClientOption(func(*valkey.ClientOption) {}),
		"WithConnectWait":  qlvalkey.WithConnectWait(time.Second),
	})
	assert.Equal(t, "WithCredentials(...)", qlvalkey.WithCredentials("u", "secret").String(), "credentials are elided")

	srv := redistest.StartTestServer(t)
	nodes, closeAll, err := qlvalkey.Dial([]string{srv.Addr()}, nil, qlvalkey.WithTLS(false), nil)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, closeAll()) })
	require.Len(t, nodes, 1)
	client := nodes[0].(*qlvalkey.Node).Client().(valkey.Client)
	node, err := qlvalkey.New(client, nil, qlvalkey.WithName("a"), nil)
	require.NoError(t, err)
	assert.Equal(t, "a", node.String())
}
