package redigo_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/redigo"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
	"github.com/quorumlock/quorumlock/strategies"
)

// TestFailedSubscriptionIsMadeAgain: the herald refuses SUBSCRIBE (an ACL
// without it) when the waiter first subscribes; once it allows it again,
// the waiter's subscription is made again and it is handed the lock on
// release, not after its retry delay of a minute (issue 26, item 5).
func TestFailedSubscriptionIsMadeAgain(t *testing.T) {
	t.Parallel()
	redistest.RequireServer(t)
	var addrs []string
	for range 3 {
		addrs = append(addrs, redistest.StartTestServer(t).Addr())
	}
	heraldAddr := slices.Min(addrs) // nodes are named by address; the first is the herald
	admin := redistest.AdminClient(t, heraldAddr)
	ctx := redistest.TestContext(t)
	locker := func() *core.Locker {
		nodes, _, err := redigo.Dial(addrs)
		require.NoError(t, err)
		l, err := core.New(nodes, core.WithRetryDelay(strategies.JitterDelay(time.Minute, time.Minute)))
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, l.Close()) })
		return l
	}
	holder, waiter := locker(), locker()
	const key = "failed-subscription"
	held, err := holder.Acquire(ctx, key)
	require.NoError(t, err)

	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "default", "-subscribe").Err())
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a third of the retry delay
		defer cancel()
		lock, err := waiter.Acquire(wctx, key)
		if err == nil {
			err = lock.Release(context.Background())
		}
		got <- err
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	// The waiter lost its round and asked to subscribe: refused.
	for waiter.Stats().Watching == 0 {
		select {
		case <-tick.C:
		case err := <-got:
			require.FailNow(t, "the waiter returned before the release", "%v", err)
		}
	}
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "default", "+subscribe").Err())
	// Made again: the confirmed subscription queues the waiter's ticket.
	qkey, _ := driver.QueueKey(key)
	for admin.LLen(ctx, qkey).Val() == 0 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			require.FailNow(t, "the waiter never queued: its subscription was not made again")
		}
	}
	require.NoError(t, held.Release(ctx))
	require.NoError(t, <-got, "handed over on release, not polled for")
}

// TestHeraldHangsUnderItsWaiters: the herald is stopped (SIGSTOP) while a
// waiter is queued on it. The holder's release finds it hung, which wakes
// the waiter to queue on the next node by name; it takes the lock there
// instead of after its retry delay of a minute (issue 26, item 6).
func TestHeraldHangsUnderItsWaiters(t *testing.T) {
	t.Parallel()
	redistest.RequireServer(t)
	var servers []*redistest.Server
	var addrs []string
	for range 3 {
		s := redistest.StartTestServer(t)
		servers, addrs = append(servers, s), append(addrs, s.Addr())
	}
	herald := slices.Index(addrs, slices.Min(addrs)) // nodes are named by address
	admin := redistest.AdminClient(t, addrs[herald])
	ctx := redistest.TestContext(t)
	nodes, _, err := redigo.Dial(addrs)
	require.NoError(t, err)
	l, err := core.New(nodes, core.WithRetryDelay(strategies.JitterDelay(time.Minute, time.Minute)))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.Close()) })
	const key = "herald-hangs"
	held, err := l.Acquire(ctx, key)
	require.NoError(t, err)

	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a third of the retry delay
		defer cancel()
		lock, err := l.Acquire(wctx, key)
		if err == nil {
			err = lock.Release(context.Background())
		}
		got <- err
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	qkey, _ := driver.QueueKey(key)
	for admin.LLen(ctx, qkey).Val() == 0 { // queued on the herald
		select {
		case <-tick.C:
		case <-ctx.Done():
			require.FailNow(t, "the waiter never queued on the herald")
		}
	}
	require.NoError(t, servers[herald].Pause())
	defer func() { assert.NoError(t, servers[herald].Resume()) }()
	require.NoError(t, held.Release(ctx))
	require.NoError(t, <-got, "queued again on the next node by name, not woken by its retry delay")
}
