package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/conformance/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The README's first command must work on a machine with nothing set up.
func TestQuickstartEmbedded(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, &out, nil), out.String())
	for _, want := range []string{
		"5 embedded miniredis servers, TTL 10s, quorum 3 of 5",
		"8 acquisitions, never two holders at once",
		"2 of 5 nodes down",
		"acquired \"quickstart:orders:42\" on the remaining 3 nodes",
		"3 of 5 nodes down",
		"core.ErrUnavailable",
		"all checks passed",
	} {
		assert.Contains(t, out.String(), want)
	}
}

// With REDIS_ADDRS the same program runs on real servers, taking nodes
// "down" by closing its own connections to them.
func TestQuickstartRealServers(t *testing.T) {
	redistest.RequireServer(t)
	var addrs []string
	for range 5 {
		s, err := redistest.StartServer(t.Context())
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		addrs = append(addrs, s.Addr())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, &out, addrs), out.String())
	assert.Contains(t, out.String(), "5 servers from REDIS_ADDRS")
	assert.Contains(t, out.String(), "all checks passed")
	assert.Contains(t, out.String(), "redis: client is closed")
}
