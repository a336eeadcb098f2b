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

func kinds(events []core.Event) []core.EventKind {
	out := make([]core.EventKind, len(events))
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
			require.Equal(t, []core.EventKind{core.EventAcquire, core.EventExtend, core.EventRelease}, kinds(events))
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
			require.Equal(t, []core.EventKind{core.EventAcquire}, kinds(events))
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
			require.Equal(t, []core.EventKind{core.EventAcquire, core.EventExtend, core.EventLost, core.EventExtend}, kinds(events))
			assert.NoError(t, events[1].Err, "the first renewal")
			assert.ErrorIs(t, events[2].Err, core.ErrLockLost)
			assert.Equal(t, lock.Err(), events[2].Err)
			assert.Equal(t, core.ReasonLost, core.Reason(events[3].Err), "the renewal that found it gone")
			require.ErrorIs(t, lock.Release(t.Context()), core.ErrNotHeld)
			release := rec.take()
			require.Equal(t, []core.EventKind{core.EventRelease}, kinds(release))
			assert.Equal(t, core.ReasonNotHeld, core.Reason(release[0].Err))
		})
	})
	t.Run("several observers, in order; nil adds none", func(t *testing.T) {
		var mu sync.Mutex
		var order []string
		obs := func(name string) core.Observer {
			return core.ObserverFunc(func(_ context.Context, e core.Event) {
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
		{core.ErrNotHeld, core.ReasonNotHeld},
		{core.ErrInvalidArgument, core.ReasonInvalid},
		{errors.New("something else"), core.ReasonOther},
	} {
		assert.Equal(t, c.want, core.Reason(c.err), "%v", c.err)
	}
	for k, want := range map[core.EventKind]string{core.EventAcquire: "acquire", core.EventExtend: "extend", core.EventRelease: "release", core.EventLost: "lost", 9: "event(9)"} {
		assert.Equal(t, want, k.String())
	}
}
