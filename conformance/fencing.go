package conformance

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
	"github.com/quorumlock/quorumlock/strategies"
)

// runFencing checks fencing tokens (core.WithFencing) on real servers.
func runFencing(t *testing.T, h Harness, cfg runConfig) {
	_, cluster := h.Shared(t, 1).(ClusterServers)
	if !cluster {
		// Restarting clusters with their data is not offered by every
		// harness, and five clusters at once are heavy; clusters get PerKey.
		t.Run("StrictlyIncreasing", func(t *testing.T) {
			t.Parallel()
			fencingStrictlyIncreasing(t, h, cfg.fencing)
		})
	}
	t.Run("PerKey", func(t *testing.T) {
		t.Parallel()
		fencingPerKey(t, h)
	})
}

// fencingStrictlyIncreasing has 16 goroutines, each with its own Locker,
// take one key over five servers until they have made total acquisitions
// and seen minFaultCycles fault cycles begin (a fast backend, memory, makes
// 500 acquisitions within one cycle), recording each token inside the
// critical section, while a minority of the servers (one or two) is again
// and again stopped and started with its data, as servers with persistence
// restart. The tokens, in the order of the critical sections, must
// strictly increase.
func fencingStrictlyIncreasing(t *testing.T, h Harness, total int) {
	const minFaultCycles = 5
	const n, goroutines = 5, 16
	servers := h.Isolated(t, n)
	seed := time.Now().UnixNano()
	t.Logf("fault schedule seed: %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	// A bound on the whole run, so that a broken backend fails it instead
	// of leaving sixteen goroutines retrying until the test binary's timeout.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	lockers := fencedPollingLockers(t, servers, goroutines)

	stop, faultsDone := make(chan struct{}), make(chan struct{})
	var faults atomic.Int64
	go func() {
		defer close(faultsDone)
		restartMinorities(t, servers, rng, &faults, stop)
	}()
	start := time.Now()
	tokens, releaseFailures := fencedTokens(ctx, t, lockers, key(t), func(made int64) bool {
		return made <= int64(total) || faults.Load() < minFaultCycles
	})
	close(stop)
	<-faultsDone
	t.Logf("%d fenced acquisitions in %v, %d fault cycles, %d releases short of a quorum",
		len(tokens), time.Since(start).Round(time.Millisecond), faults.Load(), releaseFailures)

	require.GreaterOrEqual(t, len(tokens), total)
	assert.GreaterOrEqual(t, faults.Load(), int64(minFaultCycles), "servers were restarted during the run")
	assert.Positive(t, tokens[0])
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("token %d of the critical sections is %d, after %d: tokens must strictly increase (around it: %v)",
				i, tokens[i], tokens[i-1], tokens[max(0, i-5):min(len(tokens), i+5)])
		}
	}
}

// fencedPollingLockers returns count fencing Lockers over servers that
// poll for a held lock, without release notices, to keep the run short: a
// release then wakes a waiter in each of the other waiting Lockers, a fair
// hand-off that costs a few round trips, where polling lets the releaser
// take the lock straight back. Measured on redis under the race detector
// with fencingStrictlyIncreasing's fault schedule: 2000 acquisitions in
// 25 s with notices, 7 s polling every 10-50 ms. Lifecycle/WakeOnRelease
// tests the notices.
func fencedPollingLockers(t *testing.T, servers Servers, count int) []*core.Locker {
	lockers := make([]*core.Locker, count)
	for g := range lockers {
		lockers[g] = newLocker(t, servers.Nodes(t), parallel, core.WithFencing(true),
			core.WithTTL(2*time.Second), core.WithTries(1_000_000),
			core.WithWakeOnRelease(false),
			core.WithRetryDelay(strategies.JitterDelay(10*time.Millisecond, 50*time.Millisecond)))
	}
	return lockers
}

// restartMinorities plays the faults until stop: a random minority of
// servers goes down with its data, stays down a few milliseconds, and
// comes back; then all servers run a moment. It counts the cycles begun
// in faults.
func restartMinorities(t *testing.T, servers Servers, rng *rand.Rand, faults *atomic.Int64, stop <-chan struct{}) {
	n := servers.Len()
	for {
		down := rng.Perm(n)[:1+rng.IntN(n-quorumOf(n))]
		faults.Add(1)
		for _, i := range down {
			if err := servers.StopKeepingData(i); err != nil {
				t.Errorf("stopping server %d keeping its data: %v", i, err)
				return
			}
		}
		time.Sleep(time.Duration(2+rng.IntN(48)) * time.Millisecond)
		for _, i := range down {
			if err := servers.Start(i); err != nil {
				t.Errorf("starting server %d: %v", i, err)
				return
			}
		}
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(50+rng.IntN(150)) * time.Millisecond):
		}
	}
}

// fencedTokens has each Locker, on a goroutine of its own, acquire k and
// release it again while more(the acquisitions claimed so far, this one
// included) holds, and returns the tokens in the order of the critical
// sections and how many releases failed short of a quorum. Two holders
// inside at once fail t.
func fencedTokens(ctx context.Context, t *testing.T, lockers []*core.Locker, k string, more func(made int64) bool) ([]int64, int64) {
	var (
		mu              sync.Mutex
		tokens          []int64
		claimed, inside atomic.Int64
		releaseFailures atomic.Int64
		wg              sync.WaitGroup
	)
	for _, l := range lockers {
		wg.Go(func() {
			for more(claimed.Add(1)) {
				lock, err := l.Acquire(ctx, k)
				if !assert.NoError(t, err) {
					return
				}
				if inside.Add(1) != 1 {
					t.Error("two holders inside the critical section")
				}
				mu.Lock()
				tokens = append(tokens, lock.Token())
				mu.Unlock()
				inside.Add(-1)
				// A release that misses stopped servers leaves the key to
				// expire there; the lock was held all the same.
				if err := lock.Release(ctx); err != nil {
					releaseFailures.Add(1)
					if !assert.True(t, errors.Is(err, core.ErrUnavailable) || errors.Is(err, core.ErrNotHeld), "release: %v", err) {
						return
					}
				}
			}
		})
	}
	wg.Wait()
	return tokens, releaseFailures.Load()
}

// fencingPerKey takes fenced locks through several Lockers over three
// shared servers (three clusters, with a cluster harness), for keys with
// and without hash tags, one after another and concurrently: each key's
// tokens strictly increase, and its counter (driver.FenceKey) sits on the
// servers, in the key's slot, never expiring, at the last token.
func fencingPerKey(t *testing.T, h Harness) {
	servers := h.Shared(t, 3)
	ctx, base := t.Context(), key(t)
	keys := []string{base, "{" + base + "}:tagged", "a{" + base + "}b"}
	lockers := make([]*core.Locker, 3)
	for i := range lockers {
		lockers[i] = newLocker(t, servers.Nodes(t), parallel, core.WithFencing(true), core.WithTries(1_000_000))
	}
	counters := fenceCounters(ctx, t, servers, keys)

	last := make([]int64, len(keys))
	sequential := func(round int) {
		t.Helper()
		for j, k := range keys {
			lock, err := lockers[round%len(lockers)].TryAcquire(ctx, k)
			require.NoError(t, err, "uncontended acquisition of %q", k)
			require.Greater(t, lock.Token(), last[j], "key %q: tokens strictly increase", k)
			last[j] = lock.Token()
			checkFenceCounter(ctx, t, servers, counters[j], lock.Token())
			require.NoError(t, lock.Release(ctx))
		}
	}
	for round := range 6 {
		sequential(round)
	}
	var wg sync.WaitGroup
	for j, k := range keys {
		wg.Go(func() { last[j] = fencedConcurrently(ctx, t, lockers, k, last[j]) })
	}
	wg.Wait()
	sequential(0)
}

// fenceCounters returns each key's fencing counter, and checks, with a
// cluster harness, that each sits in its key's slot.
func fenceCounters(ctx context.Context, t *testing.T, servers Servers, keys []string) []string {
	t.Helper()
	cs, cluster := servers.(ClusterServers)
	counters := make([]string, len(keys))
	for j, k := range keys {
		var ok bool
		counters[j], ok = driver.FenceKey(k)
		require.True(t, ok, "key %q has a fencing counter", k)
		if !cluster {
			continue
		}
		for i := range servers.Len() {
			slot, err := cs.KeySlot(ctx, i, k)
			require.NoError(t, err)
			cslot, err := cs.KeySlot(ctx, i, counters[j])
			require.NoError(t, err)
			require.Equal(t, slot, cslot, "key %q and its counter %q in one slot", k, counters[j])
		}
	}
	return counters
}

// checkFenceCounter checks the counter after an uncontended acquisition
// that gave token with every server up: each server granted it, so none
// is above the token, and a quorum holds it, never expiring.
func checkFenceCounter(ctx context.Context, t *testing.T, servers Servers, counter string, token int64) {
	t.Helper()
	at := 0
	for i := range servers.Len() {
		v, ttl, ok, err := servers.Get(ctx, i, counter)
		require.NoError(t, err)
		require.True(t, ok, "server %d has the counter %q", i, counter)
		assert.Zero(t, ttl, "the counter %q never expires", counter)
		c, err := strconv.ParseInt(v, 10, 64)
		require.NoError(t, err, "counter %q on server %d", counter, i)
		assert.LessOrEqual(t, c, token, "counter %q on server %d", counter, i)
		if c == token {
			at++
		}
	}
	assert.GreaterOrEqual(t, at, quorumOf(servers.Len()), "a quorum holds counter %q at the token %d", counter, token)
}

// fencedConcurrently has every Locker take k from two goroutines, ten
// times each, and checks that the tokens, in the order of the critical
// sections, strictly increase from last, the token of the acquisition
// before. It returns the last token.
func fencedConcurrently(ctx context.Context, t *testing.T, lockers []*core.Locker, k string, last int64) int64 {
	const perGoroutine = 10
	var mu sync.Mutex
	tokens := []int64{last}
	var wg sync.WaitGroup
	for _, l := range lockers {
		for range 2 {
			wg.Go(func() {
				for range perGoroutine {
					lock, err := l.Acquire(ctx, k)
					if !assert.NoError(t, err, "key %q", k) {
						return
					}
					mu.Lock()
					tokens = append(tokens, lock.Token())
					mu.Unlock()
					assert.NoError(t, lock.Release(ctx))
				}
			})
		}
	}
	wg.Wait()
	assert.Len(t, tokens, 1+len(lockers)*2*perGoroutine, "key %q", k)
	for i := 1; i < len(tokens); i++ {
		if !assert.Greater(t, tokens[i], tokens[i-1], "key %q: token %d of the critical sections (0: the last sequential one)", k, i) {
			break
		}
	}
	return tokens[len(tokens)-1]
}
