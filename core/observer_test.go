package core_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/strategies"
)

// observerFunc adapts a function to core.Observer.
type observerFunc func(ctx context.Context, e core.Event)

func (f observerFunc) Observe(ctx context.Context, e core.Event) { f(ctx, e) }

// recorder is an Observer that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []core.Event
}

func (r *recorder) Observe(_ context.Context, e core.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e.Nodes = append([]core.NodeResult(nil), e.Nodes...)
	r.events = append(r.events, e)
}

func (r *recorder) take() []core.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

func kinds(events []core.Event) []core.Op {
	out := make([]core.Op, len(events))
	for i, e := range events {
		out[i] = e.Kind
	}
	return out
}

func TestObserver(t *testing.T) {
	t.Run("acquire, extend, release", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rec := &recorder{}
			l, _ := newLocker(t, 3, core.WithObserver(rec), core.WithFencing(true))
			start := time.Now()
			lock, err := l.Acquire(t.Context(), "k")
			require.NoError(t, err)
			time.Sleep(time.Second)
			require.NoError(t, lock.Extend(t.Context()))
			require.NoError(t, lock.Release(t.Context()))
			require.NoError(t, lock.Release(t.Context()), "a second release is not reported")

			events := rec.take()
			require.Equal(t, []core.Op{core.OpAcquire, core.OpExtend, core.OpRelease}, kinds(events))
			acq := events[0]
			assert.Equal(t, "k", acq.Key)
			assert.Equal(t, start, acq.Start)
			assert.NoError(t, acq.Err)
			assert.Equal(t, 1, acq.Tries)
			assert.Equal(t, int64(1), acq.Token)
			assert.Equal(t, core.DefaultTTL-drift(core.DefaultTTL), acq.Validity)
			require.Len(t, acq.Nodes, 3)
			for _, n := range acq.Nodes {
				assert.Equal(t, core.OutcomeOK, n.Outcome)
			}
			ext := events[1]
			assert.Equal(t, start.Add(time.Second), ext.Start)
			assert.NoError(t, ext.Err)
			assert.Equal(t, core.DefaultTTL-drift(core.DefaultTTL), ext.Validity)
			assert.Len(t, ext.Nodes, 3)
			assert.NoError(t, events[2].Err)
			assert.Len(t, events[2].Nodes, 3)
		})
	})
	t.Run("a contended acquisition", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rec := &recorder{}
			l, nodes := newLocker(t, 3, core.WithObserver(rec), core.WithTries(2), core.WithRetryDelay(strategies.JitterDelay(time.Second, time.Second)), core.WithWakeOnRelease(false))
			for _, n := range nodes {
				n.Set("k", "rival", time.Hour)
			}
			start := time.Now()
			_, err := l.Acquire(t.Context(), "k")
			require.ErrorIs(t, err, core.ErrNotAcquired)
			events := rec.take()
			require.Equal(t, []core.Op{core.OpAcquire}, kinds(events))
			e := events[0]
			assert.Equal(t, err, e.Err)
			assert.Equal(t, core.ReasonContended, core.Reason(e.Err))
			assert.Equal(t, 2, e.Tries)
			assert.Equal(t, time.Second, e.Duration)
			assert.Equal(t, start, e.Start)
			assert.Equal(t, []core.Outcome{core.OutcomeRefused, core.OutcomeRefused, core.OutcomeRefused}, outcomesOf(e.Nodes))
		})
	})
	t.Run("a lost lock, found at an extension by the keep-alive", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rec := &recorder{}
			const ttl = 3 * time.Second
			l, nodes := newLocker(t, 3, core.WithObserver(rec), core.WithTTL(ttl))
			lock, err := l.Acquire(t.Context(), "k")
			require.NoError(t, err)
			require.NoError(t, lock.KeepAlive())
			time.Sleep(ttl/3 + time.Millisecond) // one renewal
			synctest.Wait()
			for _, n := range nodes {
				n.Del("k")
			}
			<-lock.Done()
			synctest.Wait() // the renewal reports after it ends the lock
			events := rec.take()
			require.Equal(t, []core.Op{core.OpAcquire, core.OpExtend, core.OpLost, core.OpExtend}, kinds(events))
			assert.NoError(t, events[1].Err, "the first renewal")
			assert.ErrorIs(t, events[2].Err, core.ErrLockLost)
			assert.Equal(t, lock.Err(), events[2].Err)
			assert.Equal(t, core.ReasonLost, core.Reason(events[3].Err), "the renewal that found it gone")
			require.ErrorIs(t, lock.Release(t.Context()), core.ErrNotHeld)
			release := rec.take()
			require.Equal(t, []core.Op{core.OpRelease}, kinds(release))
			assert.Equal(t, core.ReasonNotHeld, core.Reason(release[0].Err))
		})
	})
	t.Run("several observers, in order; nil adds none", func(t *testing.T) {
		var mu sync.Mutex
		var order []string
		obs := func(name string) core.Observer {
			return observerFunc(func(_ context.Context, e core.Event) {
				mu.Lock()
				defer mu.Unlock()
				order = append(order, name+":"+e.Kind.String())
			})
		}
		l, _ := newLocker(t, 1, core.WithObserver(obs("a")), core.WithObserver(nil), core.WithObserver(obs("b")))
		lock, err := l.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		require.NoError(t, lock.Release(t.Context()))
		assert.Equal(t, []string{"a:acquire", "b:acquire", "a:release", "b:release"}, order)
	})
	t.Run("bad input is reported too", func(t *testing.T) {
		rec := &recorder{}
		l, _ := newLocker(t, 1, core.WithObserver(rec))
		_, err := l.Acquire(t.Context(), "")
		require.ErrorIs(t, err, core.ErrInvalidArgument)
		events := rec.take()
		require.Len(t, events, 1)
		assert.Equal(t, core.ReasonInvalid, core.Reason(events[0].Err))
		assert.Nil(t, events[0].Nodes)
	})
}

func TestReason(t *testing.T) {
	l, nodes := newLocker(t, 1)
	closed, err := core.New(memory.AsNodes(memory.NewNodes(1)))
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	_, closedErr := closed.Acquire(t.Context(), "k")
	nodes[0].Set("held", "rival", time.Hour)
	_, contended := l.TryAcquire(t.Context(), "held")
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	_, canceledErr := l.Acquire(cancelled, "k")
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, core.ReasonOK},
		{contended, core.ReasonContended},
		{canceledErr, core.ReasonCanceled},
		{closedErr, core.ReasonClosed},
		{fmt.Errorf("wrapped: %w", core.ErrUnavailable), core.ReasonUnavailable},
		{core.ErrValidityExpired, core.ReasonExpired},
		{core.ErrLockLost, core.ReasonLost},
		// Do's error when fn returned its context's error after the lock
		// was lost or at risk: lost, not canceled.
		{errors.Join(context.Canceled, core.ErrLockLost), core.ReasonLost},
		{core.ErrNotHeld, core.ReasonNotHeld},
		{core.ErrInvalidArgument, core.ReasonInvalid},
		{errors.New("something else"), core.ReasonOther},
	} {
		assert.Equal(t, c.want, core.Reason(c.err), "%v", c.err)
	}
	for k, want := range map[core.Op]string{core.OpAcquire: "acquire", core.OpExtend: "extend", core.OpRelease: "release", core.OpInspect: "inspect", core.OpLost: "lost", core.OpWait: "wait"} {
		assert.Equal(t, want, k.String())
	}
}

// chainKey is the context key under which the start hooks of
// TestObserverStart leave their names.
type chainKey struct{}

// chainOf returns the names the start hooks left in ctx.
func chainOf(ctx context.Context) string {
	s, _ := ctx.Value(chainKey{}).(string)
	return s
}

// starting is an Observer with a start hook: it logs each start, then
// adds its name to the context's chain, or returns nil when it has none.
type starting struct {
	name string
	mu   *sync.Mutex
	log  *[]string
}

func (s starting) Start(ctx context.Context, op core.Op, key string) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	*s.log = append(*s.log, s.name+" starts "+op.String()+" "+key+" after ["+chainOf(ctx)+"]")
	if s.name == "" {
		return nil // keeps the context
	}
	return context.WithValue(ctx, chainKey{}, chainOf(ctx)+s.name)
}

func (s starting) Observe(ctx context.Context, e core.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*s.log = append(*s.log, "observed "+e.Kind.String()+" in ["+chainOf(ctx)+"]")
}

// ctxNode records the start hooks' chain that reaches each node call.
type ctxNode struct {
	*memory.Node
	mu   *sync.Mutex
	seen map[string]bool
}

func (n ctxNode) see(ctx context.Context) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.seen[chainOf(ctx)] = true
}

func (n ctxNode) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	n.see(ctx)
	return n.Node.SetNX(ctx, key, value, ttl)
}

func (n ctxNode) EvalSHA(ctx context.Context, sha string, keys, args []string) (any, error) {
	n.see(ctx)
	return n.Node.EvalSHA(ctx, sha, keys, args)
}

func (n ctxNode) Eval(ctx context.Context, script string, keys, args []string) (any, error) {
	n.see(ctx)
	return n.Node.Eval(ctx, script, keys, args)
}

// TestObserverStart: the Observers' start hooks run in order as Acquire,
// TryAcquire, Extend and Release begin, each given the context the one
// before returned (nil keeps it); the node calls and every Observe get the
// last one. A nil context starts nothing, and the keep-alive's extensions
// have no start.
func TestObserverStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var log []string
		seen := map[string]bool{}
		mems := memory.NewNodes(3)
		nodes := make([]core.Node, len(mems))
		for i, m := range mems {
			nodes[i] = ctxNode{Node: m, mu: &mu, seen: seen}
		}
		hook := func(name string) core.Observer { return starting{name: name, mu: &mu, log: &log} }
		plain := observerFunc(func(ctx context.Context, e core.Event) {
			mu.Lock()
			defer mu.Unlock()
			log = append(log, "plain observed "+e.Kind.String()+" in ["+chainOf(ctx)+"]")
		})
		l, err := core.New(nodes, core.WithObserver(hook("a")), core.WithObserver(plain),
			core.WithObserver(hook("")), core.WithObserver(hook("b")))
		require.NoError(t, err)
		defer func() { require.NoError(t, l.Close()) }()
		take := func() []string {
			mu.Lock()
			defer mu.Unlock()
			out := log
			log = nil
			return out
		}
		want := func(kind string) []string {
			return []string{
				"a starts " + kind + " k after []", " starts " + kind + " k after [a]", "b starts " + kind + " k after [a]",
				"observed " + kind + " in [ab]", "plain observed " + kind + " in [ab]", "observed " + kind + " in [ab]", "observed " + kind + " in [ab]",
			}
		}

		lock, err := l.Acquire(t.Context(), "k")
		require.NoError(t, err)
		assert.Equal(t, want("acquire"), take())
		require.NoError(t, lock.Extend(t.Context()))
		assert.Equal(t, want("extend"), take())
		require.NoError(t, lock.Release(t.Context()))
		assert.Equal(t, want("release"), take())
		lock, err = l.TryAcquire(t.Context(), "k")
		require.NoError(t, err)
		assert.Equal(t, want("acquire"), take())
		mu.Lock()
		assert.Equal(t, map[string]bool{"ab": true}, seen, "every node call in the hooks' context")
		mu.Unlock()

		var nilCtx context.Context // refused: no start
		_, err = l.Acquire(nilCtx, "k")
		require.ErrorIs(t, err, core.ErrInvalidArgument)
		assert.Equal(t, []string{"observed acquire in []", "plain observed acquire in []", "observed acquire in []", "observed acquire in []"},
			take(), "no start for a nil context")

		require.NoError(t, lock.KeepAlive())
		time.Sleep(l.TTL()/core.DefaultKeepAliveDivisor + time.Millisecond) // one renewal
		synctest.Wait()
		assert.Equal(t, []string{"observed extend in []", "plain observed extend in []", "observed extend in []", "observed extend in []"},
			take(), "a renewal has no start")
		require.NoError(t, lock.Release(t.Context()))
	})
}

// TestObserverLockKind: every event names the kind of lock it is about,
// on success and failure alike.
func TestObserverLockKind(t *testing.T) {
	lockKinds := []struct {
		name    string
		acquire func(context.Context, *core.Locker, ...string) (*core.Lock, error)
		bad     []string // keys the acquisition refuses
	}{
		{"mutex", func(ctx context.Context, l *core.Locker, keys ...string) (*core.Lock, error) {
			return l.Acquire(ctx, keys[0])
		}, []string{""}},
		{"multi", func(ctx context.Context, l *core.Locker, keys ...string) (*core.Lock, error) {
			return l.AcquireAll(ctx, keys...)
		}, []string{"a", "a"}},
		{"shared", func(ctx context.Context, l *core.Locker, keys ...string) (*core.Lock, error) {
			return l.AcquireShared(ctx, keys[0])
		}, []string{""}},
		{"leader", func(ctx context.Context, l *core.Locker, keys ...string) (*core.Lock, error) {
			return l.Campaign(ctx, keys[0], "host-a")
		}, []string{""}},
	}
	for _, kind := range lockKinds {
		t.Run(kind.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := &recorder{}
				l, nodes := newLocker(t, 3, core.WithObserver(rec))
				lock, err := kind.acquire(t.Context(), l, "a", "b")
				require.NoError(t, err)
				require.NoError(t, lock.Extend(t.Context()))
				for _, n := range nodes {
					for _, k := range n.Keys() {
						n.Del(k)
					}
				}
				require.ErrorIs(t, lock.Extend(t.Context()), core.ErrLockLost)
				require.ErrorIs(t, lock.Release(t.Context()), core.ErrNotHeld)
				_, err = kind.acquire(t.Context(), l, kind.bad...)
				require.ErrorIs(t, err, core.ErrInvalidArgument)

				// Two nodes restarted empty: the next acquisition waits
				// for them (OpWait) before it wins.
				restartEmpty(nodes[0])
				restartEmpty(nodes[1])
				lock, err = kind.acquire(t.Context(), l, "a", "b")
				require.NoError(t, err)
				require.NoError(t, lock.Release(t.Context()))

				events := rec.take()
				require.Equal(t, []core.Op{core.OpAcquire, core.OpExtend, core.OpLost, core.OpExtend, core.OpRelease,
					core.OpAcquire, core.OpWait, core.OpAcquire, core.OpRelease}, kinds(events))
				for _, e := range events {
					assert.Equal(t, kind.name, e.Lock, "%s event", e.Kind)
				}
			})
		})
	}
}
