package conformance

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// The checks of the optional node capabilities (driver.Batcher,
// driver.Watcher). A node without the capability passes them: core falls
// back to plain Node calls. They log instead of skipping, so that a run
// under CI=true, where nothing may be skipped, still passes for backends
// that lack one.

func batcherOf(t *testing.T, n core.Node) (driver.Batcher, bool) {
	t.Helper()
	b, ok := n.(driver.Batcher)
	if !ok {
		t.Logf("%T does not implement driver.Batcher: nothing to check", n)
	}
	return b, ok
}

func watcherOf(t *testing.T, n core.Node) (driver.Watcher, bool) {
	t.Helper()
	w, ok := n.(driver.Watcher)
	if !ok {
		t.Logf("%T does not implement driver.Watcher: nothing to check", n)
	}
	return w, ok
}

// unknownSHA is the SHA of a script no server has seen.
func unknownSHA(t *testing.T) string {
	sum := sha1.Sum([]byte("return 'never loaded' -- " + t.Name()))
	return hex.EncodeToString(sum[:])
}

// batch checks that one EvalBatch mixing EVAL, EVALSHA and an unknown SHA
// gives each call the reply (or error) a single call would get, in order,
// and acts on the server; and that the replies of many calls each land in
// their own call.
func batch(t *testing.T, h Harness) {
	n, s := oneNode(t, h)
	b, ok := batcherOf(t, n)
	if !ok {
		return
	}
	ctx, base := t.Context(), key(t)
	b.EvalBatch(ctx, nil) // nothing to do, and no panic
	batchMixed(ctx, t, n, b, s, base)
	batchMany(ctx, t, b, s, base)
}

// batchMixed runs the batch of EVAL, EVALSHA and an unknown SHA on keys
// under base: on keys held as "mine" (extended, released), one held by
// another owner, and a missing one.
func batchMixed(ctx context.Context, t *testing.T, n core.Node, b driver.Batcher, s Servers, base string) {
	extendEval, releaseEval := base+":extend-eval", base+":release-eval"
	releaseSHA, extendSHA, theirs := base+":release-sha", base+":extend-sha", base+":theirs"
	for _, k := range []string{extendEval, extendSHA} {
		require.NoError(t, s.Set(ctx, 0, k, "mine", 2*time.Second))
	}
	for _, k := range []string{releaseEval, releaseSHA} {
		require.NoError(t, s.Set(ctx, 0, k, "mine", time.Minute))
	}
	require.NoError(t, s.Set(ctx, 0, theirs, "theirs", time.Minute))
	// Load the scripts run by SHA, on the very keys (a Redis Cluster
	// caches scripts per master), with a value that changes nothing.
	for k, sc := range map[string]driver.Script{releaseSHA: driver.ScriptRelease, theirs: driver.ScriptRelease, extendSHA: driver.ScriptExtend} {
		r, err := n.Eval(ctx, sc.Source(), []string{k}, []string{"nobody", "60000"})
		require.NoError(t, err)
		require.Equal(t, int64(0), r)
	}

	calls := []driver.Call{
		{Source: driver.ScriptExtend.Source(), Keys: []string{extendEval}, Args: []string{"mine", "60000"}},
		{Source: driver.ScriptRelease.Source(), Keys: []string{releaseEval}, Args: []string{"mine"}},
		{SHA: unknownSHA(t), Keys: []string{base + ":noscript"}, Args: []string{"x"}},
		{SHA: driver.ScriptRelease.SHA(), Keys: []string{releaseSHA}, Args: []string{"mine"}},
		{SHA: driver.ScriptRelease.SHA(), Keys: []string{theirs}, Args: []string{"mine"}},
		{SHA: driver.ScriptExtend.SHA(), Keys: []string{extendSHA}, Args: []string{"mine", "60000"}},
		{Source: driver.ScriptExtend.Source(), Keys: []string{base + ":missing"}, Args: []string{"mine", "60000"}},
	}
	want := []any{int64(1), int64(1), nil, int64(1), int64(0), int64(1), int64(0)}
	evalBatchWithin(ctx, t, b, calls, 5*time.Second)
	for i, c := range calls {
		if i == 2 {
			require.Error(t, c.Err, "EVALSHA of an unknown SHA")
			assert.Equal(t, driver.KindNoScript, n.Classify(c.Err), "NOSCRIPT in a batch must be classified as for EvalSHA: %v", c.Err)
			assert.Nil(t, c.Reply)
			continue
		}
		require.NoError(t, c.Err, "call %d", i)
		assert.Equal(t, want[i], c.Reply, "call %d", i)
	}
	checkBatchActed(ctx, t, s, []string{extendEval, extendSHA}, []string{releaseEval, releaseSHA}, theirs, base+":missing")
}

// evalBatchWithin runs b.EvalBatch and fails t if it has not returned
// within limit.
func evalBatchWithin(ctx context.Context, t *testing.T, b driver.Batcher, calls []driver.Call, limit time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.EvalBatch(ctx, calls)
	}()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("EvalBatch did not return within %v", limit)
	}
}

// checkBatchActed checks what batchMixed's batch did on server 0: the
// extended keys are still "mine" with the new expiry, the released ones are
// gone, another owner's key stays, and a missing key was not created.
func checkBatchActed(ctx context.Context, t *testing.T, s Servers, extended, released []string, theirs, missing string) {
	t.Helper()
	for _, k := range extended {
		v, ttl, found, err := s.Get(ctx, 0, k)
		require.NoError(t, err)
		require.True(t, found, "%s", k)
		assert.Equal(t, "mine", v)
		assert.InDelta(t, 60000, ttl.Milliseconds(), 1000, "%s: the batch's PEXPIRE must take effect", k)
	}
	for _, k := range released {
		_, _, found, err := s.Get(ctx, 0, k)
		require.NoError(t, err)
		assert.False(t, found, "%s: the batch's release must delete the key", k)
	}
	assert.Equal(t, []string{"theirs"}, valuesOf(t, s, theirs), "another owner's key must stay")
	_, _, found, err := s.Get(ctx, 0, missing)
	require.NoError(t, err)
	assert.False(t, found, "extending a missing key must not create it")
}

// batchMany checks a batch of many calls: each reply lands in its own
// call, in order.
func batchMany(ctx context.Context, t *testing.T, b driver.Batcher, s Servers, base string) {
	many := make([]driver.Call, 64)
	for i := range many {
		k := fmt.Sprintf("%s:many:%d", base, i)
		if i%3 == 0 {
			require.NoError(t, s.Set(ctx, 0, k, "mine", time.Minute))
		}
		many[i] = driver.Call{SHA: driver.ScriptExtend.SHA(), Source: driver.ScriptExtend.Source(), Keys: []string{k}, Args: []string{"mine", "30000"}}
	}
	b.EvalBatch(ctx, many)
	for i, c := range many {
		require.NoError(t, c.Err, "call %d", i)
		want := int64(0)
		if i%3 == 0 {
			want = 1
		}
		assert.Equal(t, want, c.Reply, "call %d", i)
	}
}

// batchCalls is a batch that would release k (held as "mine") and extend
// it, by source and by SHA.
func batchCalls(k string) []driver.Call {
	return []driver.Call{
		{Source: driver.ScriptExtend.Source(), Keys: []string{k}, Args: []string{"mine", "60000"}},
		{SHA: driver.ScriptExtend.SHA(), Keys: []string{k}, Args: []string{"mine", "60000"}},
		{Source: driver.ScriptRelease.Source(), Keys: []string{k}, Args: []string{"mine"}},
		{SHA: driver.ScriptRelease.SHA(), Keys: []string{k}, Args: []string{"mine"}},
	}
}

// batchCancelled checks that a batch whose context has ended fails every
// call, promptly, and acts on nothing.
func batchCancelled(t *testing.T, h Harness) {
	n, s := oneNode(t, h)
	b, ok := batcherOf(t, n)
	if !ok {
		return
	}
	k := key(t)
	require.NoError(t, s.Set(t.Context(), 0, k, "mine", 10*time.Second))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	calls := batchCalls(k)
	returnsWithin(t, 2*time.Second, func() error { b.EvalBatch(ctx, calls); return nil })
	for i, c := range calls {
		require.Error(t, c.Err, "call %d of a batch with a cancelled context", i)
		assert.Equal(t, driver.KindContext, n.Classify(c.Err), "call %d: %v", i, c.Err)
		assert.Nil(t, c.Reply)
	}
	v, ttl, found, err := s.Get(t.Context(), 0, k)
	require.NoError(t, err)
	require.True(t, found, "a cancelled batch must not release")
	assert.Equal(t, "mine", v)
	assert.LessOrEqual(t, ttl, 10*time.Second, "a cancelled batch must not extend")
}

// batchOnPausedServer checks that a batch to a server that does not
// answer returns when its context ends, with every call failed.
func batchOnPausedServer(t *testing.T, h Harness) {
	n, s := isolatedNode(t, h)
	b, ok := batcherOf(t, n)
	if !ok {
		return
	}
	k := key(t)
	require.NoError(t, s.Set(t.Context(), 0, k, "mine", time.Minute))
	// Warm the connection up so the pause hits an established one too.
	warm := batchCalls(k + ":warm")
	b.EvalBatch(t.Context(), warm)
	require.NoError(t, warm[0].Err)

	require.NoError(t, s.Pause(0))
	defer func() { require.NoError(t, s.Resume(0)) }()
	calls := batchCalls(k)
	returnsWithin(t, 2*time.Second, func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		b.EvalBatch(ctx, calls)
		return nil
	})
	for i, c := range calls {
		assert.Error(t, c.Err, "call %d of a batch to a paused server must fail when its context ends", i)
	}
}

// notices records notify calls, with their messages, without ever
// blocking.
type notices chan string

func newNotices() notices { return make(notices, 64) }

func (c notices) notify(message string) {
	select {
	case c <- message:
	default:
	}
}

// await fails the test unless a notice arrives within d, and returns its
// message.
func (c notices) await(t *testing.T, d time.Duration, msgAndArgs ...any) string {
	t.Helper()
	select {
	case m := <-c:
		return m
	case <-time.After(d):
		require.Fail(t, "no notice", msgAndArgs...)
		return ""
	}
}

// none fails the test if a notice arrives within d.
func (c notices) none(t *testing.T, d time.Duration, msgAndArgs ...any) {
	t.Helper()
	select {
	case <-c:
		assert.Fail(t, "unexpected notice", msgAndArgs...)
	case <-time.After(d):
	}
}

// watchOwner owns the tickets that release queues: the watches of these
// checks listen on its channel of the key (watchChannel).
const watchOwner = "watcher"

func watchChannel(k string) string { return driver.WaiterChannel(k, watchOwner) }

// release runs the release script through n as core does on the herald,
// with a ticket of watchOwner queued first, so that a release that deletes
// the key hands it over and publishes the ticket on watchChannel(k). It
// returns the script's reply (2: deleted and handed over; 0: not held) and
// leaves no ticket behind.
func release(t *testing.T, n core.Node, k, value string) any {
	t.Helper()
	q, ok := driver.QueueKey(k)
	require.True(t, ok)
	ticket := watchOwner + "." + value
	_, err := n.Eval(t.Context(), driver.ScriptEnqueue.Source(), []string{k, q}, []string{ticket, "60000", "force"})
	require.NoError(t, err)
	r, err := n.Eval(t.Context(), driver.ScriptRelease.Source(), []string{k, q}, []string{value, driver.ReleaseChannel(k)})
	require.NoError(t, err)
	_, err = n.Eval(t.Context(), driver.ScriptDequeue.Source(), []string{q}, []string{ticket})
	require.NoError(t, err)
	return r
}

// watchFor subscribes to ch with a bounded context and stops when the
// test ends.
func watchFor(t *testing.T, w driver.Watcher, ch string, c notices) func() {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	stop, err := w.Watch(ctx, ch, c.notify)
	require.NoError(t, err, "Watch(%q)", ch)
	require.NotNil(t, stop)
	t.Cleanup(stop)
	return stop
}

// watch checks that a Watch sees the releases of its key, and only those
// that delete it, until stopped.
func watch(t *testing.T, h Harness) {
	n, s := oneNode(t, h)
	w, ok := watcherOf(t, n)
	if !ok {
		return
	}
	ctx, k := t.Context(), key(t)
	ch := watchChannel(k)
	a, b := newNotices(), newNotices()
	stopA := watchFor(t, w, ch, a)

	// A release that deletes nothing publishes nothing. The release that
	// follows is the control: its notice arrives after any the first
	// could have caused.
	require.NoError(t, s.Set(ctx, 0, k, "theirs", time.Minute))
	assert.Equal(t, int64(0), release(t, n, k, "mine"))
	require.NoError(t, s.Set(ctx, 0, k, "mine", time.Minute))
	assert.Equal(t, int64(2), release(t, n, k, "mine"))
	assert.Equal(t, watchOwner+".mine", a.await(t, 5*time.Second, "the release of a held key must notify its watcher"),
		"the release publishes the ticket it handed the key to")
	a.none(t, 100*time.Millisecond, "a release that deleted nothing must not notify")

	// Another key's release is not this watcher's business.
	other := k + ":other"
	require.NoError(t, s.Set(ctx, 0, other, "mine", time.Minute))
	assert.Equal(t, int64(2), release(t, n, other, "mine"))

	// A second watch of the same channel, on the same node: stopping the
	// first must leave it working.
	stopB := watchFor(t, w, ch, b)
	returnsWithin(t, 5*time.Second, func() error { stopA(); return nil })
	stopA() // a second stop is harmless
	require.NoError(t, s.Set(ctx, 0, k, "mine", time.Minute))
	assert.Equal(t, int64(2), release(t, n, k, "mine"))
	b.await(t, 5*time.Second, "a watch must survive the stop of another watch of its channel")
	a.none(t, 100*time.Millisecond, "a stopped watch must not notify (nor the other key's release)")
	returnsWithin(t, 5*time.Second, func() error { stopB(); stopB(); return nil })

	// Watching again after both stopped works.
	c := newNotices()
	watchFor(t, w, ch, c)
	require.NoError(t, s.Set(ctx, 0, k, "mine", time.Minute))
	assert.Equal(t, int64(2), release(t, n, k, "mine"))
	c.await(t, 5*time.Second, "a new watch of a channel whose watches all stopped")
	b.none(t, 0, "a stopped watch must not notify")
}

// waitQueue checks the wait queue of the herald node: ScriptEnqueue queues
// tickets only while the lock is held (unless forced), ScriptDequeue takes
// one out, and the release script hands the lock to the oldest ticket,
// publishing that ticket on its owner's channel and answering 2, and
// publishes nothing once the queue is empty.
func waitQueue(t *testing.T, h Harness) {
	n, s := oneNode(t, h)
	ctx, k := t.Context(), key(t)
	q, ok := driver.QueueKey(k)
	require.True(t, ok)
	keys := []string{k, q}
	enqueue := func(ticket, mode string) any {
		r, err := n.Eval(ctx, driver.ScriptEnqueue.Source(), keys, []string{ticket, "60000", mode})
		require.NoError(t, err)
		return r
	}
	assert.Equal(t, int64(0), enqueue("early", ""), "a free lock queues no one")
	assert.Equal(t, int64(1), enqueue("forced", "force"), "a forced ticket is queued even when the lock is free")
	r, err := n.Eval(ctx, driver.ScriptDequeue.Source(), []string{q}, []string{"forced"})
	require.NoError(t, err)
	assert.Equal(t, int64(1), r, "dequeue removes the ticket")

	require.NoError(t, s.Set(ctx, 0, k, "holder", time.Minute))
	for _, ticket := range []string{"me.1", "other.1", "me.gone"} {
		assert.Equal(t, int64(1), enqueue(ticket, ""), "a held lock queues %s", ticket)
	}
	r, err = n.Eval(ctx, driver.ScriptDequeue.Source(), []string{q}, []string{"me.gone"})
	require.NoError(t, err)
	assert.Equal(t, int64(1), r)

	// Each ticket goes to its owner's channel, and nothing to the key's.
	w, ok := watcherOf(t, n)
	me, other, all := newNotices(), newNotices(), newNotices()
	if ok {
		watchFor(t, w, driver.WaiterChannel(k, "me"), me)
		watchFor(t, w, driver.WaiterChannel(k, "other"), other)
		watchFor(t, w, driver.ReleaseChannel(k), all)
	}
	releaseQueued := func(value string) any {
		r, err := n.Eval(ctx, driver.ScriptRelease.Source(), keys, []string{value, driver.ReleaseChannel(k)})
		require.NoError(t, err)
		return r
	}
	for _, want := range []struct {
		ticket string
		c      notices
	}{{"me.1", me}, {"other.1", other}} {
		assert.Equal(t, int64(2), releaseQueued("holder"), "the release hands over to %s", want.ticket)
		if ok {
			assert.Equal(t, want.ticket, want.c.await(t, 5*time.Second, "the release must publish the ticket it popped on its owner's channel"))
		}
		require.NoError(t, s.Set(ctx, 0, k, "holder", time.Minute))
	}
	assert.Equal(t, int64(1), releaseQueued("holder"), "an empty queue: a plain release")
	if ok {
		all.none(t, 100*time.Millisecond, "a release with no one to hand over to publishes nothing")
		me.none(t, 0, "only the owner of a ticket hears it")
		other.none(t, 0, "only the owner of a ticket hears it")
	}
	assert.Equal(t, int64(0), releaseQueued("holder"), "a release that deletes nothing")
	if ok {
		all.none(t, 100*time.Millisecond, "a release that deleted nothing must not publish")
	}
}

// watchOnPausedServer checks that Watch and stop stay bounded when the
// server does not answer, and that watching works again once it does.
func watchOnPausedServer(t *testing.T, h Harness) {
	n, s := isolatedNode(t, h)
	w, ok := watcherOf(t, n)
	if !ok {
		return
	}
	k := key(t)
	// Warm the node up, then watch before the pause.
	_, err := n.SetNX(t.Context(), k+":warm", "v", time.Minute)
	require.NoError(t, err)
	a := newNotices()
	stop := watchFor(t, w, watchChannel(k), a)

	require.NoError(t, s.Pause(0))
	resumed := false
	defer func() {
		if !resumed {
			require.NoError(t, s.Resume(0))
		}
	}()
	returnsWithin(t, 3*time.Second, func() error { stop(); return nil })

	err = returnsWithin(t, 3*time.Second, func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		stop, err := w.Watch(ctx, driver.ReleaseChannel(k+":paused"), func(string) {})
		if err == nil {
			stop()
		}
		return err
	})
	require.Error(t, err, "Watch on a paused server must fail when its context ends")

	require.NoError(t, s.Resume(0))
	resumed = true
	b := newNotices()
	watchFor(t, w, watchChannel(k), b)
	require.NoError(t, s.Set(t.Context(), 0, k, "mine", time.Minute))
	assert.Equal(t, int64(2), release(t, n, k, "mine"))
	b.await(t, 5*time.Second, "a watch made after the server resumed")
	a.none(t, 0, "a watch stopped during the pause must not notify")
}

// capabilitiesOnClosedClient checks that a node whose client is closed
// fails batches and watches, and never hangs.
func capabilitiesOnClosedClient(t *testing.T, h Harness) {
	n := h.ClosedNode(t)
	if b, ok := n.(driver.Batcher); ok {
		calls := batchCalls(key(t))
		returnsWithin(t, 2*time.Second, func() error { b.EvalBatch(t.Context(), calls); return nil })
		for i, c := range calls {
			assert.Error(t, c.Err, "call %d of a batch on a closed client", i)
		}
	}
	if w, ok := n.(driver.Watcher); ok {
		err := returnsWithin(t, 3*time.Second, func() error {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			stop, err := w.Watch(ctx, driver.ReleaseChannel(key(t)), func(string) {})
			if err == nil {
				stop()
			}
			return err
		})
		assert.Error(t, err, "Watch on a closed client")
	}
}

// watchAcrossRestart checks that a subscription made before the server
// restarted still delivers the releases made after it: the watcher
// subscribes again on its own (a lost connection must not silence a
// waiter for good). Notices the restart itself causes are allowed.
func watchAcrossRestart(t *testing.T, h Harness) {
	n, s := isolatedNode(t, h)
	w, ok := watcherOf(t, n)
	if !ok {
		return
	}
	k := key(t)
	c := newNotices()
	watchFor(t, w, watchChannel(k), c)
	require.NoError(t, s.Stop(0))
	require.NoError(t, s.Start(0))
	// Keep taking and releasing the key until a notice arrives: the
	// watcher may take a moment (its reconnection backoff) to subscribe
	// again, and the node to reconnect.
	deadline := time.Now().Add(10 * time.Second)
	for {
		for len(c) > 0 {
			<-c // notices of the restart itself
		}
		// A SET whose reply was lost may have landed: the value is "v"
		// either way, so the release below deletes it.
		if _, err := n.SetNX(t.Context(), k, "v", time.Minute); err == nil {
			require.Equal(t, int64(2), release(t, n, k, "v"))
		}
		select {
		case <-c:
			return
		case <-time.After(100 * time.Millisecond):
		}
		require.True(t, time.Now().Before(deadline), "no notice of a release in the 10 s after the restart")
	}
}
