package core_test

// Fuzz targets for what core accepts from its callers: lock keys, the hash
// slot of a key and its side keys, and the options of New. Each checks that
// nothing panics or hangs, and that what is refused is refused with
// ErrInvalidArgument and nothing else. Seed inputs are added below and kept
// in testdata/fuzz/<Name>/; plain `go test` runs them.

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"
	"github.com/quorumlock/quorumlock/strategies"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
)

// fuzzCallTimeout bounds each call of a fuzzed operation through its
// context; fuzzHangGrace is how much longer the call may take to notice,
// after which the input is reported as a hang.
const (
	fuzzCallTimeout = 5 * time.Second
	fuzzHangGrace   = 5 * time.Second
)

// within runs fn with a context that ends after fuzzCallTimeout, and fails
// the test if fn has not returned soon after: a hang fails instead of
// blocking the fuzzer forever.
func within(t *testing.T, what string, fn func(ctx context.Context)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), fuzzCallTimeout)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(ctx)
	}()
	timer := time.NewTimer(fuzzCallTimeout + fuzzHangGrace)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		t.Fatalf("%s did not return within %v", what, fuzzCallTimeout+fuzzHangGrace)
	}
}

// keySeeds are the keys every key target starts from: empty, hash tags
// well and badly formed, binary, invalid UTF-8, unicode, and long ones.
var keySeeds = []string{
	"",
	"a",
	"orders:42",
	"{a}",
	"}{",
	"{}",
	"a}",
	"{a",
	"a{",
	"{",
	"}",
	"{{x}}",
	"{}{a}",
	"{user:1}:lock",
	"a{b}c}",
	"\x00",
	"\x00\x01\x02\xff",
	"\xff\xfe\xfd",
	"\xc3\x28",
	"ключ🔒{замок}",
	"🔒}",
	strings.Repeat("k", 64<<10),
	strings.Repeat("}", 4096),
	"{" + strings.Repeat("x", 64<<10-2) + "}",
}

// refusedKey reports whether core must refuse key under prefix: an empty
// key, or, with fencing, a stored key whose counter cannot share its slot.
func refusedKey(prefix, key string, fencing bool) bool {
	if key == "" {
		return true
	}
	if fencing {
		_, ok := driver.FenceKey(prefix + key)
		return !ok
	}
	return false
}

func FuzzKeys(f *testing.F) {
	for _, key := range keySeeds {
		f.Add(key, "", false)
		f.Add(key, "", true)
	}
	for _, prefix := range []string{"lock:", "}", "{p}", "{", "\xff", "}{"} {
		f.Add("a", prefix, false)
		f.Add("a", prefix, true)
		f.Add("", prefix, true)
		f.Add("{a}", prefix, true)
	}
	f.Fuzz(func(t *testing.T, key, prefix string, fencing bool) {
		// A generous node timeout: success is asserted, and a loaded
		// machine running the race detector must not turn it into an
		// outage.
		opts := []core.Option{core.WithKeyPrefix(prefix), core.WithNodeTimeout(2 * time.Second)}
		if fencing {
			opts = append(opts, core.WithFencing(true))
		}
		nodes := memory.NewNodes(3)
		l, err := core.New(memory.AsNodes(nodes), opts...)
		if err != nil {
			t.Fatalf("New with prefix %q, fencing %t: %v", prefix, fencing, err)
		}
		defer func() {
			within(t, "Close", func(context.Context) {
				if err := l.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
		}()
		rkey := prefix + key
		fence, _ := driver.FenceKey(rkey)
		refused := refusedKey(prefix, key, fencing)

		var lock *core.Lock
		within(t, "TryAcquire", func(ctx context.Context) { lock, err = l.TryAcquire(ctx, key) })
		if refused {
			if !errors.Is(err, core.ErrInvalidArgument) {
				t.Fatalf("TryAcquire(%q) with prefix %q, fencing %t: got %v, want an error matching ErrInvalidArgument", key, prefix, fencing, err)
			}
			if lock != nil {
				t.Fatalf("TryAcquire(%q) returned a lock with its error %v", key, err)
			}
			for i, n := range nodes {
				if keys := n.Keys(); len(keys) != 0 {
					t.Fatalf("node %d holds %q after a refused key", i, keys)
				}
			}
			return
		}
		if err != nil {
			if errors.Is(err, core.ErrInvalidArgument) {
				t.Fatalf("TryAcquire(%q) with prefix %q, fencing %t: key refused: %v", key, prefix, fencing, err)
			}
			// Three fresh in-process nodes and nobody else: nothing but a
			// bug makes the round fail.
			t.Fatalf("TryAcquire(%q) with prefix %q, fencing %t on fresh nodes: %v", key, prefix, fencing, err)
		}
		if lock == nil {
			t.Fatal("TryAcquire returned neither a lock nor an error")
		}
		if lock.Key() != key {
			t.Fatalf("Lock.Key() = %q, want %q", lock.Key(), key)
		}
		wantToken := int64(0)
		if fencing {
			wantToken = 1
		}
		if lock.Token() != wantToken {
			t.Fatalf("Lock.Token() = %d, want %d", lock.Token(), wantToken)
		}
		for i, n := range nodes {
			if v, _, ok := n.Get(rkey); !ok || v != lock.Value() {
				t.Fatalf("node %d: stored key %q holds %q (present %t), want the lock value %q", i, rkey, v, ok, lock.Value())
			}
		}

		within(t, "Extend", func(ctx context.Context) { err = lock.Extend(ctx) })
		if err != nil {
			t.Fatalf("Extend of a fresh lock on %q: %v", key, err)
		}
		within(t, "Release", func(ctx context.Context) { err = lock.Release(ctx) })
		if err != nil {
			t.Fatalf("Release of %q: %v", key, err)
		}
		var want []string // what a released lock leaves: its fencing counter only
		if fencing {
			want = []string{fence}
		}
		for i, n := range nodes {
			if keys := n.Keys(); !slices.Equal(keys, want) {
				t.Fatalf("node %d holds %q after Release, want %q", i, keys, want)
			}
		}
		within(t, "Extend after Release", func(ctx context.Context) { err = lock.Extend(ctx) })
		if !errors.Is(err, core.ErrNotHeld) {
			t.Fatalf("Extend after Release: got %v, want ErrNotHeld", err)
		}
		within(t, "second Release", func(ctx context.Context) { err = lock.Release(ctx) })
		if err != nil {
			t.Fatalf("second Release: %v", err)
		}
	})
}

// refHashSlot is an independent Redis Cluster key slot, written from the
// cluster specification: bitwise CRC16-XMODEM of the hash tag (or of the
// whole key), modulo 16384.
func refHashSlot(key string) int {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc & 0x3fff)
}

// refHasTag reports whether key has a non-empty hash tag.
func refHasTag(key string) bool {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		return strings.IndexByte(key[s+1:], '}') > 0
	}
	return false
}

func FuzzHashSlotTags(f *testing.F) {
	for _, key := range keySeeds {
		f.Add(key)
	}
	f.Add("123456789")
	f.Add("foo")
	f.Add("{user1000}.following")
	f.Fuzz(func(t *testing.T, key string) {
		slot := driver.HashSlot(key)
		if slot < 0 || slot >= driver.SlotCount {
			t.Fatalf("HashSlot(%q) = %d, out of [0, %d)", key, slot, driver.SlotCount)
		}
		if want := refHashSlot(key); slot != want {
			t.Fatalf("HashSlot(%q) = %d, the cluster specification gives %d", key, slot, want)
		}
		// A key with a hash tag, or a non-empty one without "}", always has
		// side keys in its slot; others may by chance.
		mustHave := refHasTag(key) || (key != "" && !strings.Contains(key, "}"))
		for _, side := range []struct {
			name   string
			fn     func(string) (string, bool)
			suffix string
		}{
			{"FenceKey", driver.FenceKey, driver.FenceSuffix},
			{"QueueKey", driver.QueueKey, driver.QueueSuffix},
		} {
			name, ok := side.fn(key)
			if !strings.HasSuffix(name, side.suffix) {
				t.Fatalf("%s(%q) = %q, without the suffix %q", side.name, key, name, side.suffix)
			}
			if ok && driver.HashSlot(name) != slot {
				t.Fatalf("%s(%q) = %q, ok, in slot %d, but the key is in slot %d", side.name, key, name, driver.HashSlot(name), slot)
			}
			if mustHave && !ok {
				t.Fatalf("%s(%q) = %q, not ok, for a key that has a side key in its slot", side.name, key, name)
			}
			if ok && name == key {
				t.Fatalf("%s(%q) is the key itself", side.name, key)
			}
		}
	})
}

// The bits of FuzzOptions' set argument: which options it gives New.
const (
	optTTL = 1 << iota
	optQuorum
	optNodeTimeout
	optDrift
	optTries
	optRetry
	optKeepAlive
	optMaxHold
	optFencing
	optStrategy
)

func FuzzOptions(f *testing.F) {
	const all = 1<<10 - 1
	ms := int64(time.Millisecond)
	s := int64(time.Second)
	// n, set, ttl, quorum, node timeout, drift, tries, retry min, retry max, keep-alive, max hold
	f.Add(uint8(3), uint16(0), int64(0), 0, int64(0), 0.0, 0, int64(0), int64(0), int64(0), int64(0))
	f.Add(uint8(0), uint16(0), int64(0), 0, int64(0), 0.0, 0, int64(0), int64(0), int64(0), int64(0))
	f.Add(uint8(5), uint16(all), 10*s, 3, 50*ms, 0.01, 32, 50*ms, 250*ms, 3*s, time.Minute.Nanoseconds())
	f.Add(uint8(5), uint16(all), 10*s, 2, 50*ms, 0.01, 32, 50*ms, 250*ms, 3*s, int64(0))
	f.Add(uint8(1), uint16(optTTL|optDrift), 3*ms, 0, int64(0), 0.0, 1, int64(0), int64(0), int64(0), int64(0))
	f.Add(uint8(1), uint16(optTTL|optDrift|optNodeTimeout), 3*ms, 0, ms/2, 0.0, 1, int64(0), int64(0), int64(0), int64(0))
	f.Add(uint8(7), uint16(optDrift), int64(0), 0, int64(0), math.NaN(), 0, int64(0), int64(0), int64(0), int64(0))
	f.Add(uint8(7), uint16(optDrift), int64(0), 0, int64(0), math.Inf(1), 0, int64(0), int64(0), int64(0), int64(0))
	f.Add(uint8(7), uint16(optDrift), int64(0), 0, int64(0), math.Inf(-1), 0, int64(0), int64(0), int64(0), int64(0))
	f.Add(uint8(7), uint16(optDrift), int64(0), 0, int64(0), -0.5, 0, int64(0), int64(0), int64(0), int64(0))
	f.Add(uint8(7), uint16(optDrift), int64(0), 0, int64(0), 0.9999999999999999, 0, int64(0), int64(0), int64(0), int64(0))
	f.Add(uint8(2), uint16(optTTL|optDrift), int64(math.MaxInt64), 0, int64(0), 0.9999999999999999, 0, int64(0), int64(0), int64(0), int64(0))
	f.Add(uint8(2), uint16(optTTL), int64(math.MaxInt64), 0, int64(0), 0.0, 0, int64(0), int64(0), int64(0), int64(0))
	f.Add(uint8(3), uint16(optTTL), int64(-1), 0, int64(0), 0.0, 0, int64(0), int64(0), int64(0), int64(0))
	f.Add(uint8(3), uint16(optQuorum), int64(0), -1, int64(0), 0.0, 0, int64(0), int64(0), int64(0), int64(0))
	f.Add(uint8(3), uint16(optQuorum), int64(0), 4, int64(0), 0.0, 0, int64(0), int64(0), int64(0), int64(0))
	f.Add(uint8(3), uint16(optNodeTimeout), int64(0), 0, int64(-1), 0.0, 0, int64(0), int64(0), int64(0), int64(0))
	f.Add(uint8(3), uint16(optNodeTimeout), int64(0), 0, 10*s, 0.0, 0, int64(0), int64(0), int64(0), int64(0))
	f.Add(uint8(3), uint16(optTries), int64(0), 0, int64(0), 0.0, 0, int64(0), int64(0), int64(0), int64(0))
	f.Add(uint8(3), uint16(optTries), int64(0), 0, int64(0), 0.0, math.MinInt, int64(0), int64(0), int64(0), int64(0))
	f.Add(uint8(3), uint16(optRetry), int64(0), 0, int64(0), 0.0, 0, 250*ms, 50*ms, int64(0), int64(0))
	f.Add(uint8(3), uint16(optRetry), int64(0), 0, int64(0), 0.0, 0, int64(-1), int64(-5), int64(0), int64(0))
	f.Add(uint8(3), uint16(optKeepAlive), int64(0), 0, int64(0), 0.0, 0, int64(0), int64(0), int64(-1), int64(0))
	f.Add(uint8(3), uint16(optKeepAlive), int64(0), 0, int64(0), 0.0, 0, int64(0), int64(0), 10*s, int64(0))
	f.Add(uint8(3), uint16(optMaxHold), int64(0), 0, int64(0), 0.0, 0, int64(0), int64(0), int64(0), int64(-1))
	f.Add(uint8(4), uint16(optFencing|optStrategy|optQuorum), int64(0), 4, int64(0), 0.0, 0, int64(0), int64(0), int64(0), int64(0))
	f.Fuzz(func(t *testing.T, n uint8, set uint16, ttl int64, quorum int, nodeTimeout int64, drift float64,
		tries int, retryMin, retryMax, keepAlive, maxHold int64,
	) {
		n %= 8
		var opts []core.Option
		given := func(bit uint16) bool { return set&bit != 0 }
		if given(optTTL) {
			opts = append(opts, core.WithTTL(time.Duration(ttl)))
		}
		if given(optQuorum) {
			opts = append(opts, core.WithQuorum(quorum))
		}
		if given(optNodeTimeout) {
			opts = append(opts, core.WithNodeTimeout(time.Duration(nodeTimeout)))
		}
		if given(optDrift) {
			opts = append(opts, core.WithDriftFactor(drift))
		}
		if given(optTries) {
			opts = append(opts, core.WithTries(tries))
		}
		if given(optRetry) {
			opts = append(opts, core.WithRetryDelay(strategies.JitterDelay(time.Duration(retryMin), time.Duration(retryMax))))
		}
		if given(optKeepAlive) {
			opts = append(opts, core.WithKeepAlive(time.Duration(keepAlive)))
		}
		if given(optMaxHold) {
			opts = append(opts, core.WithMaxHold(time.Duration(maxHold)))
		}
		if given(optFencing) {
			opts = append(opts, core.WithFencing(true))
		}
		if given(optStrategy) {
			opts = append(opts, core.WithStrategy(allStrategies()[int(set>>10)%len(allStrategies())]))
		}

		nodes := memory.NewNodes(int(n))
		l, err := fuzzNew(t, nodes, opts)
		if err != nil {
			return
		}
		defer func() {
			within(t, "Close", func(context.Context) {
				if err := l.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
		}()
		if n == 0 {
			t.Fatalf("New accepted no nodes with %v", opts)
		}
		// What New accepts must be what its options document.
		if q := l.Quorum(); q <= int(n)/2 || q > int(n) {
			t.Fatalf("New(%d nodes, %v) accepted quorum %d", n, opts, q)
		}
		if given(optQuorum) && l.Quorum() != quorum {
			t.Fatalf("Quorum() = %d, WithQuorum(%d)", l.Quorum(), quorum)
		}
		if ttl := l.TTL(); ttl < time.Millisecond || ttl%time.Millisecond != 0 || ttl <= l.Drift() {
			t.Fatalf("New(%d nodes, %v) accepted TTL %v with drift %v", n, opts, ttl, l.Drift())
		}
		if l.Drift() < core.DriftAllowance {
			t.Fatalf("New(%d nodes, %v) accepted drift %v, below the allowance %v", n, opts, l.Drift(), core.DriftAllowance)
		}
		if given(optNodeTimeout) && time.Duration(nodeTimeout) >= l.TTL()-l.Drift() {
			t.Fatalf("New(%d nodes, %v) accepted node timeout %v >= TTL - drift = %v", n, opts, time.Duration(nodeTimeout), l.TTL()-l.Drift())
		}

		const key = "fuzz-options"
		var lock *core.Lock
		within(t, "TryAcquire", func(ctx context.Context) { lock, err = l.TryAcquire(ctx, key) })
		if err != nil {
			// A tiny TTL may leave no validity after the round: that is
			// an outcome of the round, never a refused argument.
			var qe *core.QuorumError
			if errors.Is(err, core.ErrInvalidArgument) || !errors.As(err, &qe) {
				t.Fatalf("TryAcquire with %v: %v, want a *QuorumError", opts, err)
			}
			return
		}
		within(t, "Release", func(ctx context.Context) { err = lock.Release(ctx) })
		if err != nil {
			// The lock may have expired on the nodes before the release.
			if !errors.Is(err, core.ErrNotHeld) && !errors.Is(err, core.ErrUnavailable) {
				t.Fatalf("Release with %v: %v", opts, err)
			}
			return
		}
		// A release succeeds on a quorum; a node that misses a tiny node
		// timeout keeps its key until the TTL.
		holding := 0
		for _, node := range nodes {
			if _, _, ok := node.Get(key); ok {
				holding++
			}
		}
		if holding > int(n)-l.Quorum() {
			t.Fatalf("%d of %d nodes still hold the key after a successful Release (quorum %d)", holding, n, l.Quorum())
		}
	})
}

// FuzzRetryPolicies calls the built-in retry policies as Acquire does
// between rounds (a TryAcquire never does): they must not panic and must
// keep their documented ranges.
func FuzzRetryPolicies(f *testing.F) {
	ms := int64(time.Millisecond)
	f.Add(50*ms, 250*ms, 1)
	f.Add(250*ms, 50*ms, 3)
	f.Add(int64(0), int64(0), 0)
	f.Add(int64(-5), int64(-1), -1)
	f.Add(ms, 30*int64(time.Second), 62)
	f.Add(ms, 30*int64(time.Second), 63)
	f.Add(ms, 30*int64(time.Second), math.MaxInt)
	// Ranges whose width overflowed int64 (they made rand.Int64N panic).
	f.Add(int64(0), int64(math.MaxInt64), 1)
	f.Add(int64(-time.Second), int64(math.MaxInt64), 1)
	f.Add(int64(math.MinInt64), int64(0), 1)
	f.Add(int64(math.MinInt64), int64(math.MaxInt64), 1)
	f.Add(ms, int64(math.MaxInt64), 70)
	f.Fuzz(func(t *testing.T, lo, hi int64, rounds int) {
		minD, maxD := time.Duration(lo), time.Duration(hi)
		within(t, "JitterDelay", func(context.Context) {
			d := strategies.JitterDelay(minD, maxD)(rounds)
			if maxD <= minD {
				if d != minD {
					t.Errorf("JitterDelay(%v, %v)(%d) = %v, want %v", minD, maxD, rounds, d, minD)
				}
			} else if d < minD || d > maxD {
				t.Errorf("JitterDelay(%v, %v)(%d) = %v, out of range", minD, maxD, rounds, d)
			}
		})
		within(t, "ExponentialJitter", func(context.Context) {
			d := strategies.ExponentialJitter(minD, maxD)(rounds)
			if d < 0 || d > max(maxD, 0) {
				t.Errorf("ExponentialJitter(%v, %v)(%d) = %v, out of [0, %v]", minD, maxD, rounds, d, max(maxD, 0))
			}
		})
	})
}

// FuzzRestartGuard gives the restart guard any max TTL, on any number of
// nodes, beside any TTL, with fencing or not: New works or says
// ErrInvalidArgument; a working guard covers the TTL; a node restarted
// empty does not vote while it is on, and votes at once while it is off.
func FuzzRestartGuard(f *testing.F) {
	s := int64(time.Second)
	// nodes, TTL (0: default), guard (0: default; <0 with off: off), off, fencing
	f.Add(uint8(3), int64(0), int64(0), false, false)
	f.Add(uint8(1), int64(0), int64(0), false, false)
	f.Add(uint8(1), int64(0), 10*s, false, true)
	f.Add(uint8(5), 2*s, 2*s, false, true)
	f.Add(uint8(5), 2*s, s, false, false)
	f.Add(uint8(3), int64(0), int64(-1), false, false)
	f.Add(uint8(3), int64(0), int64(math.MaxInt64), false, false)
	f.Add(uint8(3), int64(math.MaxInt64), int64(math.MaxInt64), false, false)
	f.Add(uint8(4), int64(0), int64(0), true, false)
	f.Fuzz(func(t *testing.T, n uint8, ttl, guard int64, off, fencing bool) {
		n = n%7 + 1
		var opts []core.Option
		if ttl != 0 {
			opts = append(opts, core.WithTTL(time.Duration(ttl)))
		}
		switch {
		case off:
			opts = append(opts, core.WithRestartGuard(0))
		case guard != 0:
			opts = append(opts, core.WithRestartGuard(time.Duration(guard)))
		}
		if fencing {
			opts = append(opts, core.WithFencing(true))
		}
		opts = append(opts, core.WithTries(1))
		nodes := memory.NewNodes(int(n))
		l, err := fuzzNew(t, nodes, opts)
		if err != nil {
			if !off && guard != 0 && guard >= int64(core.DefaultTTL) && ttl == 0 && guard < int64(100*365*24*time.Hour) {
				t.Fatalf("New refused a guard that covers the TTL: %v", err)
			}
			return
		}
		defer within(t, "Close", func(context.Context) { _ = l.Close() })
		on := l.RestartGuard() > 0
		switch {
		case off && on:
			t.Fatal("WithoutRestartGuard left the guard on")
		case !off && guard == 0 && on != (n >= 3):
			t.Fatalf("default guard on %d nodes: %v", n, l.RestartGuard())
		case on && l.RestartGuard() < l.TTL():
			t.Fatalf("guard %v does not cover the TTL %v", l.RestartGuard(), l.TTL())
		}
		var lock *core.Lock
		within(t, "TryAcquire", func(ctx context.Context) { lock, err = l.TryAcquire(ctx, "k") })
		if err != nil {
			return // a tiny TTL may leave no validity: an outcome, not a refusal
		}
		within(t, "Release", func(ctx context.Context) { _ = lock.Release(ctx) })
		for _, node := range nodes {
			node.Stop()
			node.Start() // every node restarted empty
		}
		within(t, "TryAcquire", func(ctx context.Context) { lock, err = l.TryAcquire(ctx, "k") })
		var qe *core.QuorumError
		if errors.As(err, &qe) && !answered(qe) {
			return // a round starved of CPU before it asked any node: no verdict
		}
		if on && !errors.Is(err, core.ErrNodeRestarted) {
			t.Fatalf("guard on, every node restarted: %v", err)
		}
		if !on && errors.Is(err, core.ErrNodeRestarted) {
			t.Fatalf("guard off, yet: %v", err)
		}
		if err == nil {
			within(t, "Release", func(ctx context.Context) { _ = lock.Release(ctx) })
		}
	})
}

// answered reports whether any node answered in the round of qe.
func answered(qe *core.QuorumError) bool {
	for _, n := range qe.Nodes {
		if n.Outcome != core.OutcomeNotTried && n.Outcome != core.OutcomeCanceled {
			return true
		}
	}
	return false
}

// fuzzNew runs New over nodes, bounded, and fails t unless it either works
// or returns no Locker and an error matching ErrInvalidArgument.
func fuzzNew(t *testing.T, nodes []*memory.Node, opts []core.Option) (*core.Locker, error) {
	t.Helper()
	var l *core.Locker
	var err error
	within(t, "New", func(context.Context) { l, err = core.New(memory.AsNodes(nodes), opts...) })
	switch {
	case err != nil && !errors.Is(err, core.ErrInvalidArgument):
		t.Fatalf("New(%d nodes, %v): %v, which does not match ErrInvalidArgument", len(nodes), opts, err)
	case err != nil && l != nil:
		t.Fatalf("New returned a Locker with its error %v", err)
	}
	return l, err
}
