package safety_test

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/conformance/safety"
)

// requireFaketime skips t without libfaketime, or fails it under CI.
func requireFaketime(t *testing.T) {
	t.Helper()
	redistest.RequireServer(t)
	_, err := safety.FaketimeEnv(1)
	redistest.RequireTool(t, err)
}

// TestFastServerExpiresEarly shows that a server started with a clock at
// twice the real speed expires a key after half its PX in real time: its
// key expiry follows the fast clock, and it keeps serving. The bounds hold
// under load: a key never expires before its PX on the fake clock (half
// the real time here), on a normal server never before its PX; and the
// fast server's figure is compared with a normal server's measured at the
// same time, under the same load.
func TestFastServerExpiresEarly(t *testing.T) {
	requireFaketime(t)
	ctx := t.Context()
	fast, err := safety.StartFastServer(ctx, 2)
	require.NoError(t, err)
	defer fast.Close()
	normal := redistest.StartTestServer(t)

	const px = 800 * time.Millisecond
	var wg sync.WaitGroup
	var lived [2]time.Duration
	var errs [2]error
	for i, addr := range []string{normal.Addr(), fast.Addr()} {
		wg.Go(func() { lived[i], errs[i] = safety.MeasureExpiry(ctx, addr, px) })
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	t.Logf("PX %v lived %v on a normal server, %v on one at x2", px, lived[0], lived[1])
	assert.GreaterOrEqual(t, lived[0], px-time.Millisecond, "a normal server never expires a key early")
	assert.GreaterOrEqual(t, lived[1], px/2-time.Millisecond, "never earlier than the fast clock allows")
	assert.Less(t, lived[1], lived[0]-px/4, "the fast server expires the key early, by about half its PX")
}

func TestFaketimeEnvRefusesBadRates(t *testing.T) {
	for _, rate := range []float64{0, -1, math.NaN(), math.Inf(1), 101} {
		_, err := safety.FaketimeEnv(rate)
		assert.ErrorContains(t, err, "clock rate", "rate %v", rate)
		_, err = safety.StartFastServer(context.Background(), rate)
		assert.ErrorContains(t, err, "clock rate", "rate %v", rate)
	}
}
