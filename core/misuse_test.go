package core_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"
	"github.com/quorumlock/quorumlock/strategies"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
)

// The tests of this file are the rows of the table "Bad input and the
// errors it gets" of docs/errors.md that concern core alone: each subtest
// is named as the table's "test" column names it (TestReadmeBadInputTable
// checks that every name there exists). Each checks the error's category with
// errors.Is and the start of its message as the table shows it, and that
// the call neither panics nor hangs.

// misuseCallTimeout bounds every call a misuse test makes.
const misuseCallTimeout = 10 * time.Second

// call runs fn with a context that ends after misuseCallTimeout, and
// returns its error. It fails the test if fn panics, or has not returned a
// second after that context ended.
func call(t *testing.T, fn func(ctx context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), misuseCallTimeout)
	defer cancel()
	type outcome struct {
		err      error
		panicked any
	}
	done := make(chan outcome, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- outcome{panicked: r}
			}
		}()
		done <- outcome{err: fn(ctx)}
	}()
	timer := time.NewTimer(misuseCallTimeout + time.Second)
	defer timer.Stop()
	select {
	case o := <-done:
		if o.panicked != nil {
			t.Fatalf("panicked: %v", o.panicked)
		}
		return o.err
	case <-timer.C:
		t.Fatalf("did not return within %v", misuseCallTimeout+time.Second)
		return nil
	}
}

// requireMisuse checks err against a row of the table: it matches target
// with errors.Is, and its message contains msg.
func requireMisuse(t *testing.T, err error, target error, msg string) {
	t.Helper()
	require.ErrorIs(t, err, target)
	require.ErrorContains(t, err, msg)
}

// newOf calls core.New over nodes with opts, checks that it returned no
// Locker, and returns its error.
func newOf(t *testing.T, nodes []core.Node, opts ...core.Option) error {
	t.Helper()
	var l *core.Locker
	err := call(t, func(context.Context) error {
		var err error
		l, err = core.New(nodes, opts...)
		return err
	})
	if l != nil {
		_ = l.Close()
		t.Fatalf("core.New accepted the bad input")
	}
	return err
}

func threeNodes() []core.Node { return memory.AsNodes(memory.NewNodes(3)) }

func TestMisuseNew(t *testing.T) {
	bad := func(t *testing.T, msg string, nodes []core.Node, opts ...core.Option) {
		t.Helper()
		requireMisuse(t, newOf(t, nodes, opts...), core.ErrInvalidArgument, msg)
	}
	t.Run("no_nodes", func(t *testing.T) {
		bad(t, "quorumlock: invalid argument: no nodes", nil)
		bad(t, "quorumlock: invalid argument: no nodes", []core.Node{})
	})
	t.Run("nil_node", func(t *testing.T) {
		bad(t, "quorumlock: invalid argument: node 1 is nil", []core.Node{memory.New(), nil, memory.New()})
		bad(t, "quorumlock: invalid argument: node 1 is nil", []core.Node{memory.New(), (*memory.Node)(nil)})
	})
	t.Run("same_node_twice", func(t *testing.T) {
		n := memory.New(memory.WithName("10.0.0.1:6379"))
		bad(t, `quorumlock: invalid argument: nodes 0 and 2 are both "10.0.0.1:6379": one server counted twice breaks the quorum`,
			[]core.Node{n, memory.New(), n})
		bad(t, `nodes 0 and 1 are both "a"`,
			[]core.Node{memory.New(memory.WithName("a")), memory.New(memory.WithName("a"))})
	})
	t.Run("nil_means_unset", func(t *testing.T) {
		// A nil Option is skipped, and a nil value keeps the default.
		nodes := threeNodes()
		want, err := core.New(nodes)
		require.NoError(t, err)
		l, err := core.New(nodes, nil, core.WithStrategy(nil), core.WithStrategy((*nilStrategy)(nil)),
			core.WithRetryDelay(nil), core.WithClock(nil), core.WithClock((*memory.ManualClock)(nil)), core.WithObserver(nil))
		require.NoError(t, err)
		assert.Equal(t, want.String(), l.String())
		lock, err := l.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		// Held: Acquire waits between rounds as the default retry policy
		// says (no less than 50 ms), until its context ends.
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		_, err = l.Acquire(ctx, "k")
		require.ErrorIs(t, err, core.ErrNotAcquired)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NoError(t, lock.Release(t.Context()))
	})
	t.Run("ttl_below_1ms", func(t *testing.T) {
		bad(t, "quorumlock: invalid argument: TTL 0s must be at least 1ms (WithTTL)", threeNodes(), core.WithTTL(0))
		bad(t, "quorumlock: invalid argument: TTL -1s must be at least 1ms (WithTTL)", threeNodes(), core.WithTTL(-time.Second))
		bad(t, "quorumlock: invalid argument: TTL 500µs must be at least 1ms (WithTTL)", threeNodes(), core.WithTTL(500*time.Microsecond))
	})
	t.Run("ttl_within_drift", func(t *testing.T) {
		bad(t, "quorumlock: invalid argument: TTL 2ms leaves no validity after the drift allowance of 2.02ms (WithTTL)",
			threeNodes(), core.WithTTL(2*time.Millisecond))
		bad(t, "quorumlock: invalid argument: TTL 2.5ms (2ms in whole milliseconds, the unit of PX) leaves no validity after the drift allowance of 2.02ms (WithTTL)",
			threeNodes(), core.WithTTL(2500*time.Microsecond))
	})
	t.Run("drift_factor_out_of_range", func(t *testing.T) {
		for _, f := range []float64{-0.1, 1, 1.5, math.NaN(), math.Inf(1)} {
			bad(t, fmt.Sprintf("quorumlock: invalid argument: drift factor %v must be in [0, 1) (WithDriftFactor)", f),
				threeNodes(), core.WithDriftFactor(f))
		}
	})
	t.Run("node_timeout_not_positive", func(t *testing.T) {
		bad(t, "quorumlock: invalid argument: node timeout 0s must be positive (WithNodeTimeout)", threeNodes(), core.WithNodeTimeout(0))
		bad(t, "quorumlock: invalid argument: node timeout -50ms must be positive (WithNodeTimeout)", threeNodes(), core.WithNodeTimeout(-50*time.Millisecond))
	})
	t.Run("node_timeout_not_under_ttl", func(t *testing.T) {
		bad(t, "quorumlock: invalid argument: node timeout 1s must be less than TTL - drift = 988ms (WithNodeTimeout)",
			threeNodes(), core.WithTTL(time.Second), core.WithNodeTimeout(time.Second))
	})
	t.Run("quorum_not_a_majority", func(t *testing.T) {
		bad(t, "quorumlock: invalid argument: quorum 1 is impossible for 3 nodes: it must be in [2, 3] (WithQuorum)", threeNodes(), core.WithQuorum(1))
		bad(t, "quorumlock: invalid argument: quorum 0 is impossible for 3 nodes", threeNodes(), core.WithQuorum(0))
		bad(t, "quorumlock: invalid argument: quorum -1 is impossible for 3 nodes", threeNodes(), core.WithQuorum(-1))
		bad(t, "quorumlock: invalid argument: quorum 2 is impossible for 4 nodes: it must be in [3, 4] (WithQuorum)",
			memory.AsNodes(memory.NewNodes(4)), core.WithQuorum(2))
	})
	t.Run("quorum_over_n", func(t *testing.T) {
		bad(t, "quorumlock: invalid argument: quorum 4 is impossible for 3 nodes: it must be in [2, 3] (WithQuorum)", threeNodes(), core.WithQuorum(4))
	})
	t.Run("tries_below_1", func(t *testing.T) {
		bad(t, "quorumlock: invalid argument: tries 0 must be at least 1 (WithTries)", threeNodes(), core.WithTries(0))
		bad(t, "quorumlock: invalid argument: tries -3 must be at least 1 (WithTries)", threeNodes(), core.WithTries(-3))
	})
	t.Run("keep_alive_negative", func(t *testing.T) {
		bad(t, "quorumlock: invalid argument: keep-alive interval -1s must be positive (WithKeepAlive)", threeNodes(), core.WithKeepAlive(-time.Second))
	})
	t.Run("keep_alive_too_long", func(t *testing.T) {
		bad(t, "quorumlock: invalid argument: keep-alive interval 10s must be less than TTL - drift - at-risk margin - node timeout = 7.848s: "+
			"an extension must end before the lock's validity falls below the at-risk margin 2s (WithKeepAlive, WithAtRiskMargin, WithNodeTimeout)",
			threeNodes(), core.WithKeepAlive(10*time.Second))
		// Room for a round, but not before the lock is at risk.
		bad(t, "quorumlock: invalid argument: keep-alive interval 8s must be less than TTL - drift - at-risk margin - node timeout = 7.848s",
			threeNodes(), core.WithKeepAlive(8*time.Second))
	})
	t.Run("at_risk_margin", func(t *testing.T) {
		bad(t, "quorumlock: invalid argument: at-risk margin 0s must be positive and less than TTL - drift = 9.898s (WithAtRiskMargin)",
			threeNodes(), core.WithAtRiskMargin(0))
		bad(t, "quorumlock: invalid argument: at-risk margin -1s must be positive", threeNodes(), core.WithAtRiskMargin(-time.Second))
		bad(t, "quorumlock: invalid argument: at-risk margin 10s must be positive and less than TTL - drift = 9.898s", threeNodes(), core.WithAtRiskMargin(10*time.Second))
		bad(t, "quorumlock: invalid argument: at-risk margin 7s leaves no room to keep a lock alive: TTL - drift - at-risk margin - node timeout = 2.848s must exceed the keep-alive interval 3.333333333s (WithAtRiskMargin, WithKeepAlive)",
			threeNodes(), core.WithAtRiskMargin(7*time.Second))
	})
	t.Run("max_hold_negative", func(t *testing.T) {
		bad(t, "quorumlock: invalid argument: maximum hold time -1m0s must not be negative (WithMaxHold)", threeNodes(), core.WithMaxHold(-time.Minute))
	})
	t.Run("restart_guard_under_ttl", func(t *testing.T) {
		bad(t, "quorumlock: invalid argument: restart guard max TTL 1s is shorter than the TTL 10s: a restarted node would count again while locks it forgot still live elsewhere (WithRestartGuard)",
			threeNodes(), core.WithRestartGuard(time.Second))
	})
	t.Run("restart_guard_negative", func(t *testing.T) {
		bad(t, "quorumlock: invalid argument: restart guard max TTL -1s must not be negative (WithRestartGuard; 0 turns it off)",
			threeNodes(), core.WithRestartGuard(-time.Second))
	})
	t.Run("restart_guard_over_sharded_nodes", func(t *testing.T) {
		nodes := memory.NewNodes(3)
		bad(t, "quorumlock: invalid argument: the restart guard (WithRestartGuard) cannot watch any of these nodes: all are sharded",
			[]core.Node{sharded{plainNode{nodes[0]}}, sharded{plainNode{nodes[1]}}, sharded{plainNode{nodes[2]}}},
			core.WithRestartGuard(time.Minute))
	})
}

// nilStrategy is a strategy type whose nil pointer is the misuse.
type nilStrategy struct{ strategies.Strategy }

// zeroLocker returns a Locker that New did not make.
func zeroLocker() *core.Locker { return new(core.Locker) }

func TestMisuseCalls(t *testing.T) {
	noop := func(context.Context) error { return nil }
	t.Run("empty_key", func(t *testing.T) {
		l, nodes := newLocker(t, 3)
		const msg = "quorumlock: invalid argument: key is empty"
		requireMisuse(t, call(t, func(ctx context.Context) error { _, err := l.TryAcquire(ctx, ""); return err }), core.ErrInvalidArgument, msg)
		requireMisuse(t, call(t, func(ctx context.Context) error { _, err := l.Acquire(ctx, ""); return err }), core.ErrInvalidArgument, msg)
		requireMisuse(t, call(t, func(ctx context.Context) error { return l.Do(ctx, "", noop) }), core.ErrInvalidArgument, msg)
		assert.Equal(t, memory.Calls{}, nodes[0].Calls(), "no node is asked")
	})
	t.Run("nil_context", func(t *testing.T) {
		l, _ := newLocker(t, 3)
		const msg = "quorumlock: invalid argument: context is nil"
		//lint:ignore SA1012 a nil context is the bad input under test
		requireMisuse(t, call(t, func(context.Context) error { _, err := l.TryAcquire(nil, "k"); return err }), core.ErrInvalidArgument, msg) //nolint:staticcheck
		//lint:ignore SA1012 a nil context is the bad input under test
		requireMisuse(t, call(t, func(context.Context) error { _, err := l.Acquire(nil, "k"); return err }), core.ErrInvalidArgument, msg) //nolint:staticcheck
		//lint:ignore SA1012 a nil context is the bad input under test
		requireMisuse(t, call(t, func(context.Context) error { return l.Do(nil, "k", noop) }), core.ErrInvalidArgument, msg) //nolint:staticcheck
		//lint:ignore SA1012 a nil context is the bad input under test
		requireMisuse(t, call(t, func(context.Context) error { return l.Shutdown(nil) }), core.ErrInvalidArgument, msg) //nolint:staticcheck
		lock, err := l.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		//lint:ignore SA1012 a nil context is the bad input under test
		_, _, err = lock.Hold(nil) //nolint:staticcheck
		requireMisuse(t, err, core.ErrInvalidArgument, msg)
	})
	t.Run("nil_fn", func(t *testing.T) {
		l, _ := newLocker(t, 3)
		requireMisuse(t, call(t, func(ctx context.Context) error { return l.Do(ctx, "k", nil) }), core.ErrInvalidArgument,
			"quorumlock: invalid argument: fn is nil")
	})
	t.Run("context_already_ended", func(t *testing.T) {
		l, nodes := newLocker(t, 3)
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancel2()
		for _, c := range []struct {
			ctx    context.Context
			target error
			msg    string
		}{
			{cancelled, context.Canceled, `quorumlock: acquire "k": not acquired: no node was asked (context canceled): 0 of 3 nodes ok`},
			{expired, context.DeadlineExceeded, `quorumlock: acquire "k": not acquired: no node was asked (context deadline exceeded): 0 of 3 nodes ok`},
		} {
			err := call(t, func(context.Context) error { _, err := l.Acquire(c.ctx, "k"); return err })
			requireMisuse(t, err, c.target, c.msg)
			require.ErrorIs(t, err, core.ErrNotAcquired)
			err = call(t, func(context.Context) error { _, err := l.TryAcquire(c.ctx, "k"); return err })
			requireMisuse(t, err, c.target, c.msg)
			err = call(t, func(context.Context) error { return l.Do(c.ctx, "k", noop) })
			requireMisuse(t, err, c.target, c.msg)
		}
		assert.Equal(t, memory.Calls{}, nodes[0].Calls(), "no node is asked")
	})
	t.Run("fencing_key_with_brace", func(t *testing.T) {
		l, _ := newLocker(t, 3, core.WithFencing(true))
		err := call(t, func(ctx context.Context) error { _, err := l.TryAcquire(ctx, "a}b"); return err })
		requireMisuse(t, err, core.ErrInvalidArgument,
			`quorumlock: invalid argument: key "a}b" has no hash tag and contains "}", so no fencing counter can share its cluster slot`)
		require.ErrorContains(t, err, "put the key in a hash tag, such as {a}b}")
		// A "}" in the key prefix is named where it is.
		l, _ = newLocker(t, 3, core.WithFencing(true), core.WithKeyPrefix("app}"))
		err = call(t, func(ctx context.Context) error { _, err := l.TryAcquire(ctx, "k"); return err })
		requireMisuse(t, err, core.ErrInvalidArgument,
			`quorumlock: invalid argument: key "k" (with the key prefix: "app}k") has no hash tag and contains "}"`)
		lock, err := l.TryAcquire(t.Context(), "{k}")
		require.NoError(t, err, "the suggested hash tag works behind the prefix")
		require.NoError(t, lock.Release(t.Context()))
	})
	t.Run("birth_key_as_key", func(t *testing.T) {
		l, _ := newLocker(t, 3)
		requireMisuse(t, call(t, func(ctx context.Context) error { _, err := l.TryAcquire(ctx, driver.BirthKey); return err }), core.ErrInvalidArgument,
			`quorumlock: invalid argument: key "quorumlock:birth" is reserved for the restart guard (BirthKey)`)
	})
	t.Run("identity_key_as_key", func(t *testing.T) {
		l, _ := newLocker(t, 3)
		requireMisuse(t, call(t, func(ctx context.Context) error { _, err := l.TryAcquire(ctx, driver.IdentityKey); return err }), core.ErrInvalidArgument,
			`quorumlock: invalid argument: key "quorumlock:node" is reserved for the servers' identities (IdentityKey)`)
	})
	t.Run("adopt_unknown_node", func(t *testing.T) {
		l, _ := newLocker(t, 3)
		requireMisuse(t, call(t, func(ctx context.Context) error { return l.Adopt(ctx, "10.0.0.9:6379") }), core.ErrInvalidArgument,
			`quorumlock: invalid argument: adopt: no node is named "10.0.0.9:6379"`)
	})
	t.Run("nil_or_zero_locker", func(t *testing.T) {
		const msg = "quorumlock: invalid argument: nil or zero Locker: make one with core.New"
		for _, l := range []*core.Locker{nil, zeroLocker()} {
			requireMisuse(t, call(t, func(ctx context.Context) error { _, err := l.Acquire(ctx, "k"); return err }), core.ErrInvalidArgument, msg)
			requireMisuse(t, call(t, func(ctx context.Context) error { return l.Do(ctx, "k", noop) }), core.ErrInvalidArgument, msg)
			requireMisuse(t, call(t, func(ctx context.Context) error { return l.Adopt(ctx) }), core.ErrInvalidArgument, msg)
			requireMisuse(t, call(t, func(context.Context) error { return l.Close() }), core.ErrInvalidArgument, msg)
		}
	})
}

func TestMisuseLock(t *testing.T) {
	acquire := func(t *testing.T, l *core.Locker, key string) *core.Lock {
		t.Helper()
		var lock *core.Lock
		require.NoError(t, call(t, func(ctx context.Context) error {
			var err error
			lock, err = l.TryAcquire(ctx, key)
			return err
		}))
		return lock
	}
	release := func(t *testing.T, lock *core.Lock) error {
		t.Helper()
		return call(t, func(ctx context.Context) error { return lock.Release(ctx) })
	}
	extend := func(t *testing.T, lock *core.Lock) error {
		t.Helper()
		return call(t, func(ctx context.Context) error { return lock.Extend(ctx) })
	}
	keepAlive := func(t *testing.T, lock *core.Lock) error {
		t.Helper()
		return call(t, func(context.Context) error { return lock.KeepAlive() })
	}

	t.Run("release_twice", func(t *testing.T) {
		l, nodes := newLocker(t, 3)
		lock := acquire(t, l, "k")
		require.NoError(t, release(t, lock))
		calls := nodes[0].Calls()
		require.NoError(t, release(t, lock), "a second Release is harmless")
		assert.Equal(t, calls, nodes[0].Calls(), "and does not reach the nodes")
	})
	t.Run("extend_after_release", func(t *testing.T) {
		l, _ := newLocker(t, 3)
		lock := acquire(t, l, "k")
		require.NoError(t, release(t, lock))
		requireMisuse(t, extend(t, lock), core.ErrNotHeld, `quorumlock: extend "k": already released: quorumlock: lock not held`)
		requireMisuse(t, keepAlive(t, lock), core.ErrNotHeld, `quorumlock: keep-alive of "k": already released: quorumlock: lock not held`)
	})
	t.Run("extend_after_loss", func(t *testing.T) {
		l, nodes := newLocker(t, 3)
		lock := acquire(t, l, "k")
		for _, n := range nodes {
			n.Del("k") // gone behind the holder's back
		}
		requireMisuse(t, extend(t, lock), core.ErrLockLost, `quorumlock: extend "k": lock lost: 0 of 3 nodes ok, 3 refused`)
		requireMisuse(t, extend(t, lock), core.ErrLockLost, `quorumlock: extend "k": quorumlock: lock lost`)
		requireMisuse(t, keepAlive(t, lock), core.ErrLockLost, `quorumlock: lock "k" lost: extend "k": lock lost`)
		requireMisuse(t, lock.Err(), core.ErrLockLost, `quorumlock: lock "k" lost`)
	})
	t.Run("extend_after_validity_ran_out", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, _ := newLocker(t, 3, core.WithTTL(time.Second))
			lock := acquire(t, l, "k")
			time.Sleep(time.Second)
			err := extend(t, lock)
			requireMisuse(t, err, core.ErrValidityExpired, `quorumlock: extend "k": no validity left: 0 of 3 nodes ok`)
			require.ErrorContains(t, err, "validity -12ms")
			requireMisuse(t, lock.Err(), core.ErrLockLost, `quorumlock: lock "k" lost`)
		})
	})
	t.Run("release_after_expiry", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			const ttl = 50 * time.Millisecond
			l, nodes := newLocker(t, 3, core.WithTTL(ttl), core.WithNodeTimeout(10*time.Millisecond))
			lock := acquire(t, l, "k")
			time.Sleep(2 * ttl) // the bubble's clock: the keys expire
			requireMisuse(t, release(t, lock), core.ErrNotHeld, `quorumlock: release "k": lock not held: 0 of 3 nodes ok, 3 refused`)
			assert.Equal(t, emptyEverywhere(3), keysOn(nodes))

			// The same when another owner took it over in between.
			lock = acquire(t, l, "k")
			for _, n := range nodes {
				n.Set("k", "rival", time.Minute)
			}
			requireMisuse(t, release(t, lock), core.ErrNotHeld, `quorumlock: release "k": lock not held: 0 of 3 nodes ok, 3 refused`)
		})
	})
	t.Run("nil_lock", func(t *testing.T) {
		var lock *core.Lock
		requireMisuse(t, release(t, lock), core.ErrNotHeld, "quorumlock: release of a nil lock: quorumlock: lock not held")
		requireMisuse(t, extend(t, lock), core.ErrNotHeld, "quorumlock: extend of a nil lock: quorumlock: lock not held")
		requireMisuse(t, keepAlive(t, lock), core.ErrNotHeld, "quorumlock: keep-alive of a nil lock: quorumlock: lock not held")
		_, _, err := lock.Hold(t.Context())
		requireMisuse(t, err, core.ErrNotHeld, "quorumlock: hold of a nil lock: quorumlock: lock not held")
		requireMisuse(t, lock.Err(), core.ErrNotHeld, "quorumlock: nil lock: quorumlock: lock not held")
		ctx, cancel := lock.Context(t.Context())
		defer cancel()
		<-ctx.Done()
		requireMisuse(t, context.Cause(ctx), core.ErrNotHeld, "quorumlock: nil lock")
		<-lock.Done()
		assert.Zero(t, lock.Validity())
		assert.Zero(t, lock.Token())
		assert.Empty(t, lock.Key())
	})
	t.Run("extend_nil_context", func(t *testing.T) {
		l, _ := newLocker(t, 3)
		lock := acquire(t, l, "k")
		//lint:ignore SA1012 a nil context is the bad input under test
		err := call(t, func(context.Context) error { return lock.Extend(nil) }) //nolint:staticcheck
		requireMisuse(t, err, core.ErrInvalidArgument, "quorumlock: invalid argument: context is nil")
		require.NoError(t, lock.Err(), "the lock is still held")
		//lint:ignore SA1012 Release takes a nil context as context.Background()
		require.NoError(t, call(t, func(context.Context) error { return lock.Release(nil) })) //nolint:staticcheck
	})
	t.Run("extend_context_ended", func(t *testing.T) {
		l, nodes := newLocker(t, 3)
		lock := acquire(t, l, "k")
		calls := nodes[0].Calls()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := lock.Extend(ctx)
		requireMisuse(t, err, context.Canceled, `quorumlock: extend "k": interrupted (context canceled): 0 of 3 nodes ok`)
		assert.Equal(t, calls, nodes[0].Calls(), "no node is asked")
		require.NoError(t, lock.Err(), "the lock is still held")
		require.NoError(t, release(t, lock))
	})
	t.Run("keep_alive_without_room", func(t *testing.T) {
		// New accepts this TTL: only keeping a lock alive needs room.
		l, _ := newLocker(t, 3, core.WithTTL(10*time.Millisecond), core.WithNodeTimeout(5*time.Millisecond))
		const msg = "quorumlock: invalid argument: TTL 10ms leaves no room to keep a lock alive: TTL - drift - at-risk margin - node timeout = 900µs must exceed the keep-alive interval 3.333333ms"
		lock := acquire(t, l, "k")
		requireMisuse(t, keepAlive(t, lock), core.ErrInvalidArgument, msg)
		require.NoError(t, release(t, lock))
		ran := false
		err := call(t, func(ctx context.Context) error {
			return l.Do(ctx, "k", func(context.Context) error { ran = true; return nil })
		})
		requireMisuse(t, err, core.ErrInvalidArgument, msg)
		assert.False(t, ran, "Do does not run fn on a lock it cannot keep")
	})
}

func TestMisuseClosed(t *testing.T) {
	closed := func(t *testing.T) (*core.Locker, *core.Lock) {
		t.Helper()
		l, err := core.New(threeNodes())
		require.NoError(t, err)
		var lock *core.Lock
		require.NoError(t, call(t, func(ctx context.Context) error {
			var err error
			lock, err = l.TryAcquire(ctx, "k")
			return err
		}))
		require.NoError(t, l.Close())
		return l, lock
	}
	t.Run("acquire_after_close", func(t *testing.T) {
		l, _ := closed(t)
		const msg = `quorumlock: acquire "k": quorumlock: locker closed`
		requireMisuse(t, call(t, func(ctx context.Context) error { _, err := l.Acquire(ctx, "k"); return err }), core.ErrClosed, msg)
		requireMisuse(t, call(t, func(ctx context.Context) error { _, err := l.TryAcquire(ctx, "k"); return err }), core.ErrClosed, msg)
		requireMisuse(t, call(t, func(ctx context.Context) error { return l.Do(ctx, "k", func(context.Context) error { return nil }) }), core.ErrClosed, msg)
	})
	t.Run("extend_after_close", func(t *testing.T) {
		_, lock := closed(t)
		const msg = `quorumlock: extend "k": quorumlock: locker closed`
		requireMisuse(t, call(t, func(ctx context.Context) error { return lock.Extend(ctx) }), core.ErrClosed, msg)
		requireMisuse(t, call(t, func(context.Context) error { return lock.KeepAlive() }), core.ErrClosed, msg)
	})
	t.Run("release_after_close", func(t *testing.T) {
		_, lock := closed(t)
		require.NoError(t, call(t, func(ctx context.Context) error { return lock.Release(ctx) }), "Close released it already")
		requireMisuse(t, lock.Err(), core.ErrReleased, `quorumlock: lock "k": released`)
	})
	t.Run("hold_after_close", func(t *testing.T) {
		_, lock := closed(t)
		_, _, err := lock.Hold(t.Context())
		requireMisuse(t, err, core.ErrClosed, `quorumlock: extend "k": quorumlock: locker closed`)
	})
	t.Run("release_again_after_close", func(t *testing.T) {
		nodes := memory.NewNodes(3)
		l, err := core.New(memory.AsNodes(nodes))
		require.NoError(t, err)
		lock, err := l.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		nodes[0].Stop()
		nodes[1].Stop()
		require.ErrorIs(t, lock.Release(t.Context()), core.ErrUnavailable)
		require.NoError(t, l.Close())
		requireMisuse(t, call(t, func(ctx context.Context) error { return lock.Release(ctx) }), core.ErrClosed, `quorumlock: release "k": quorumlock: locker closed`)
	})
	t.Run("close_twice", func(t *testing.T) {
		l, _ := closed(t)
		require.NoError(t, call(t, func(context.Context) error { return l.Close() }))
	})
	t.Run("close_while_acquire_waits", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			nodes := memory.NewNodes(3)
			for _, n := range nodes {
				n.Set("k", "rival", time.Hour)
			}
			l, err := core.New(memory.AsNodes(nodes), core.WithRetryDelay(strategies.JitterDelay(time.Minute, time.Minute)))
			require.NoError(t, err)
			done := make(chan error, 1)
			go func() {
				_, err := l.Acquire(context.Background(), "k")
				done <- err
			}()
			synctest.Wait() // Acquire waits to retry
			require.NoError(t, l.Close())
			err = <-done
			requireMisuse(t, err, core.ErrClosed, `quorumlock: acquire "k": quorumlock: locker closed`)
			requireMisuse(t, err, core.ErrNotAcquired, `quorumlock: acquire "k": lock held by another owner: 0 of 3 nodes ok, 3 refused`)
		})
	})
}

// badInputTable is the table of bad input of docs/errors.md, which the
// README links to.
var badInputTable = readmeTable{file: "docs/errors.md", section: "## Bad input and the errors it gets", header: "| misuse |", cells: 3, prefix: "TestMisuse"}

// TestReadmeBadInputTable keeps the table of bad input (docs/errors.md)
// and its tests together: every test a row names (TestX, or TestX/sub for the
// subtest t.Run("sub", ...) of TestX) must exist in a _test.go file of the
// repository, and every subtest of a TestMisuse... function must be named
// by a row.
func TestReadmeBadInputTable(t *testing.T) {
	rows := badInputTable.check(t)
	require.GreaterOrEqual(t, len(rows), 60, "the table's rows were not all found")
}
