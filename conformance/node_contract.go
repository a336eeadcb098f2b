package conformance

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// runNodeContract checks each protocol operation on one node, directly.
func runNodeContract(t *testing.T, h Harness) {
	checks := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"SetNX", setNX},
		{"SetNXMilliseconds", setNXMilliseconds},
		{"Expiry", expiry},
		{"ReleaseScript", releaseScript},
		{"ExtendScript", extendScript},
		{"IdentifyScript", identifyScript},
		{"NoScript", noScript},
		{"ScriptFlushRecovery", scriptFlushRecovery},
		{"CancelledContext", cancelledContext},
		{"DeadlineOnPausedServer", deadlineOnPausedServer},
		{"ClosedClient", closedClient},
		{"Keys", keys},
		{"Concurrent", concurrent},
		{"CancelledSetThenRelease", cancelledSetThenRelease},
		{"Names", names},
		{"Batch", batch},
		{"BatchCancelled", batchCancelled},
		{"BatchOnPausedServer", batchOnPausedServer},
		{"Watch", watch},
		{"WaitQueue", waitQueue},
		{"WatchOnPausedServer", watchOnPausedServer},
		{"WatchAcrossRestart", watchAcrossRestart},
		{"CapabilitiesOnClosedClient", capabilitiesOnClosedClient},
	}
	checks = append(checks, kindScripts...)
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, h)
		})
	}
}

func oneNode(t *testing.T, h Harness) (core.Node, Servers) {
	s := h.Shared(t, 1)
	return s.Nodes(t)[0], s
}

// isolatedNode is oneNode on a server only the calling test uses, for
// faults.
func isolatedNode(t *testing.T, h Harness) (core.Node, Servers) {
	s := h.Isolated(t, 1)
	return s.Nodes(t)[0], s
}

func setNX(t *testing.T, h Harness) {
	n, s := oneNode(t, h)
	ctx, k := t.Context(), key(t)
	ok, err := n.SetNX(ctx, k, "v1", 1500*time.Millisecond)
	require.NoError(t, err)
	assert.True(t, ok, "an absent key must be set")
	v, ttl, found, err := s.Get(ctx, 0, k)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, "v1", v)
	assert.InDelta(t, 1500, ttl.Milliseconds(), 300, "TTL")

	ok, err = n.SetNX(ctx, k, "v2", time.Minute)
	require.NoError(t, err, "an existing key is a refusal, not an error")
	assert.False(t, ok)
	v, ttl, _, err = s.Get(ctx, 0, k)
	require.NoError(t, err)
	assert.Equal(t, "v1", v, "a refused SET NX must not change the key")
	assert.LessOrEqual(t, ttl, 1500*time.Millisecond, "a refused SET NX must not change the TTL")
}

func setNXMilliseconds(t *testing.T, h Harness) {
	// 1234 ms is not a whole number of seconds: sent as EX it would become
	// 1 s or 2 s.
	n, s := oneNode(t, h)
	ctx, k := t.Context(), key(t)
	ok, err := n.SetNX(ctx, k, "v", 1234*time.Millisecond)
	require.NoError(t, err)
	require.True(t, ok)
	_, ttl, found, err := s.Get(ctx, 0, k)
	require.NoError(t, err)
	require.True(t, found)
	assert.LessOrEqual(t, ttl, 1234*time.Millisecond)
	assert.Greater(t, ttl, 1100*time.Millisecond)
}

func expiry(t *testing.T, h Harness) {
	n, s := oneNode(t, h)
	ctx, k := t.Context(), key(t)
	ok, err := n.SetNX(ctx, k, "v", 50*time.Millisecond)
	require.NoError(t, err)
	require.True(t, ok)
	require.Eventually(t, func() bool {
		_, _, found, err := s.Get(ctx, 0, k)
		return err == nil && !found
	}, 5*time.Second, 5*time.Millisecond, "the key must expire after its TTL")
	ok, err = n.SetNX(ctx, k, "w", time.Second)
	require.NoError(t, err)
	assert.True(t, ok, "an expired key can be set again")
}

// evalBoth runs script s by source, then by SHA (now cached), and returns
// both replies.
func evalBoth(t *testing.T, n core.Node, s driver.Script, keys, args []string) (bySource, bySHA any) {
	t.Helper()
	ctx := t.Context()
	var err error
	bySource, err = n.Eval(ctx, s.Source(), keys, args)
	require.NoError(t, err, "EVAL %s", s.Name())
	bySHA, err = n.EvalSHA(ctx, s.SHA(), keys, args)
	require.NoError(t, err, "EVALSHA %s after EVAL", s.Name())
	return bySource, bySHA
}

func releaseScript(t *testing.T, h Harness) {
	n, s := oneNode(t, h)
	ctx, k := t.Context(), key(t)

	a, b := evalBoth(t, n, driver.ScriptRelease, []string{k}, []string{"mine"})
	assert.Equal(t, []any{int64(0), int64(0)}, []any{a, b}, "a missing key: nothing to delete")

	require.NoError(t, s.Set(ctx, 0, k, "theirs", time.Minute))
	a, b = evalBoth(t, n, driver.ScriptRelease, []string{k}, []string{"mine"})
	assert.Equal(t, []any{int64(0), int64(0)}, []any{a, b}, "another value: not ours to delete")
	v, _, found, err := s.Get(ctx, 0, k)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, "theirs", v)

	require.NoError(t, s.Set(ctx, 0, k, "mine", time.Minute))
	r, err := n.EvalSHA(ctx, driver.ScriptRelease.SHA(), []string{k}, []string{"mine"})
	require.NoError(t, err)
	assert.Equal(t, int64(1), r)
	_, _, found, err = s.Get(ctx, 0, k)
	require.NoError(t, err)
	assert.False(t, found, "our key must be deleted")
}

func extendScript(t *testing.T, h Harness) {
	n, s := oneNode(t, h)
	ctx, k := t.Context(), key(t)

	a, b := evalBoth(t, n, driver.ScriptExtend, []string{k}, []string{"mine", "60000"})
	assert.Equal(t, []any{int64(0), int64(0)}, []any{a, b}, "a missing key cannot be extended")
	_, _, found, err := s.Get(ctx, 0, k)
	require.NoError(t, err)
	assert.False(t, found, "extending a missing key must not create it")

	require.NoError(t, s.Set(ctx, 0, k, "theirs", 2*time.Second))
	a, b = evalBoth(t, n, driver.ScriptExtend, []string{k}, []string{"mine", "60000"})
	assert.Equal(t, []any{int64(0), int64(0)}, []any{a, b})
	_, ttl, _, err := s.Get(ctx, 0, k)
	require.NoError(t, err)
	assert.LessOrEqual(t, ttl, 2*time.Second, "another owner's TTL must not change")

	require.NoError(t, s.Set(ctx, 0, k, "mine", 2*time.Second))
	r, err := n.EvalSHA(ctx, driver.ScriptExtend.SHA(), []string{k}, []string{"mine", "60000"})
	require.NoError(t, err)
	assert.Equal(t, int64(1), r)
	v, ttl, found, err := s.Get(ctx, 0, k)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, "mine", v)
	assert.InDelta(t, 60000, ttl.Milliseconds(), 1000, "PEXPIRE sets the TTL in milliseconds")
}

// identifyScript: the server's identity (driver.IdentityKey) is written once,
// with the first candidate, and never expires; every later call returns
// it, whatever its candidate.
func identifyScript(t *testing.T, h Harness) {
	n, s := isolatedNode(t, h)
	ctx := t.Context()
	keys := []string{driver.IdentityKey}
	require.NoError(t, s.Del(ctx, 0, driver.IdentityKey))
	a, b := evalBoth(t, n, driver.ScriptIdentify, keys, []string{"first"})
	assert.Equal(t, []any{"first", "first"}, []any{a, b}, "set once, then read")
	r, err := n.EvalSHA(ctx, driver.ScriptIdentify.SHA(), keys, []string{"second"})
	require.NoError(t, err)
	assert.Equal(t, "first", r, "another candidate changes nothing")
	v, ttl, found, err := s.Get(ctx, 0, driver.IdentityKey)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, "first", v)
	assert.Zero(t, ttl, "no expiry")
}

func noScript(t *testing.T, h Harness) {
	n, _ := oneNode(t, h)
	_, err := n.EvalSHA(t.Context(), unknownSHA(t), []string{key(t)}, []string{"x"})
	require.Error(t, err)
	assert.Equal(t, driver.KindNoScript, n.Classify(err), "NOSCRIPT must be classified so core falls back to EVAL: %v", err)
}

func scriptFlushRecovery(t *testing.T, h Harness) {
	n, s := isolatedNode(t, h)
	ctx, k := t.Context(), key(t)
	_, err := n.Eval(ctx, driver.ScriptRelease.Source(), []string{k}, []string{"v"})
	require.NoError(t, err)
	require.NoError(t, s.FlushScripts(ctx, 0))
	_, err = n.EvalSHA(ctx, driver.ScriptRelease.SHA(), []string{k}, []string{"v"})
	require.Error(t, err, "SCRIPT FLUSH must empty the cache")
	assert.Equal(t, driver.KindNoScript, n.Classify(err))

	// Through a Locker: every operation survives a flush at any point.
	l := newLocker(t, s.Nodes(t), Strategies()[0])
	lock, err := l.TryAcquire(ctx, k)
	require.NoError(t, err)
	require.NoError(t, lock.Extend(ctx))
	require.NoError(t, s.FlushScripts(ctx, 0))
	require.NoError(t, lock.Extend(ctx), "extend after SCRIPT FLUSH")
	require.NoError(t, s.FlushScripts(ctx, 0))
	require.NoError(t, lock.Release(ctx), "release after SCRIPT FLUSH")
	assert.Equal(t, []string{""}, valuesOf(t, s, k))
}

// protocolCalls are the three node calls of the protocol, on key k.
func protocolCalls(n core.Node, k string) map[string]func(context.Context) error {
	return map[string]func(context.Context) error{
		"SetNX": func(ctx context.Context) error {
			_, err := n.SetNX(ctx, k, "v", time.Second)
			return err
		},
		"EvalSHA": func(ctx context.Context) error {
			_, err := n.EvalSHA(ctx, driver.ScriptRelease.SHA(), []string{k}, []string{"v"})
			return err
		},
		"Eval": func(ctx context.Context) error {
			_, err := n.Eval(ctx, driver.ScriptRelease.Source(), []string{k}, []string{"v"})
			return err
		},
	}
}

func cancelledContext(t *testing.T, h Harness) {
	n, _ := oneNode(t, h)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for name, call := range protocolCalls(n, key(t)) {
		err := returnsWithin(t, 2*time.Second, func() error { return call(ctx) })
		require.Error(t, err, "%s with a cancelled context", name)
		assert.Equal(t, driver.KindContext, n.Classify(err), "%s: %v", name, err)
	}
}

func deadlineOnPausedServer(t *testing.T, h Harness) {
	n, s := isolatedNode(t, h)
	k := key(t)
	// Warm the connection up so the pause hits an established one too.
	_, err := n.SetNX(t.Context(), k+":warm", "v", time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.Pause(0))
	defer func() { require.NoError(t, s.Resume(0)) }()
	for name, call := range protocolCalls(n, k) {
		err := returnsWithin(t, 3*time.Second, func() error {
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			defer cancel()
			return call(ctx)
		})
		assert.Error(t, err, "%s on a paused server must fail when its context ends", name)
	}
}

func closedClient(t *testing.T, h Harness) {
	n := h.ClosedNode(t)
	for name, call := range protocolCalls(n, key(t)) {
		err := returnsWithin(t, 2*time.Second, func() error { return call(t.Context()) })
		require.Error(t, err, "%s on a closed client", name)
		assert.Equal(t, driver.KindNodeFailure, n.Classify(err), "%s: %v", name, err)
	}
}

func keys(t *testing.T, h Harness) {
	n, s := oneNode(t, h)
	ctx := t.Context()
	base := key(t)
	for _, suffix := range []string{
		strings.Repeat("k", 64<<10),
		"заказ:42:🔒",
		"bin\x00\xff\x01",
		"{braces}:x",
		"}{",
		" spaced key ",
	} {
		k := base + suffix
		ok, err := n.SetNX(ctx, k, "v\x00alue", time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
		v, _, found, err := s.Get(ctx, 0, k)
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, "v\x00alue", v, "the key and value must round-trip byte for byte")
		r, err := n.Eval(ctx, driver.ScriptRelease.Source(), []string{k}, []string{"v\x00alue"})
		require.NoError(t, err)
		assert.Equal(t, int64(1), r)
	}
}

func concurrent(t *testing.T, h Harness) {
	n, _ := oneNode(t, h)
	ctx, base := t.Context(), key(t)
	var wg sync.WaitGroup
	var wins, errs atomic.Int32
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				k := fmt.Sprintf("%s:%d:%d", base, g, i)
				ok, err := n.SetNX(ctx, k, "v", time.Minute)
				if err != nil || !ok {
					errs.Add(1)
					continue
				}
				if r, err := n.Eval(ctx, driver.ScriptRelease.Source(), []string{k}, []string{"v"}); err != nil || r != int64(1) {
					errs.Add(1)
				}
			}
			// All goroutines race for one key: exactly one may win.
			if ok, err := n.SetNX(ctx, base+":shared", fmt.Sprint(g), time.Minute); err != nil {
				errs.Add(1)
			} else if ok {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	assert.Zero(t, errs.Load())
	assert.Equal(t, int32(1), wins.Load(), "exactly one SET NX may win a key")
}

// cancelledSetThenRelease checks that a release sent after a SET whose
// call was cancelled in flight reaches the server after that SET: it is
// how a Locker cleans up after a round that cancelled its calls (fail-fast
// does), and a release that overtakes the SET leaves a key that blocks
// every contender until its TTL runs out. A driver that spreads one
// client's commands over several connections fails this.
func cancelledSetThenRelease(t *testing.T, h Harness) {
	n, s := oneNode(t, h)
	base := key(t)
	const rounds = 200
	for i := range rounds {
		k := fmt.Sprintf("%s:%d", base, i)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = n.SetNX(ctx, k, "v", time.Minute)
		}()
		// Cancel at varying points: before, during and after the call.
		for range i % 4 {
			runtime.Gosched()
		}
		cancel()
		<-done
		_, err := runScript(t.Context(), n, driver.ScriptRelease, []string{k}, []string{"v"})
		require.NoError(t, err)
	}
	left := 0
	for i := range rounds {
		_, _, found, err := s.Get(t.Context(), 0, fmt.Sprintf("%s:%d", base, i))
		require.NoError(t, err)
		if found {
			left++
		}
	}
	assert.Zero(t, left, "of %d cancelled SETs, %d landed after the release sent after them", rounds, left)
}

func names(t *testing.T, h Harness) {
	nodes := h.Shared(t, 2).Nodes(t)
	assert.NotEmpty(t, nodes[0].String())
	assert.NotEqual(t, nodes[0].String(), nodes[1].String(), "nodes of different servers need different names")
}

// returnsWithin runs fn and fails the test if it has not returned in d.
func returnsWithin(t *testing.T, d time.Duration, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("call did not return within %v", d)
		return nil
	}
}
