package logging_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/middleware/logging"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// capture returns a logger writing JSON records at every level, and a
// function that decodes the records written so far.
func capture(t *testing.T, level slog.Level) (*slog.Logger, func() []map[string]any) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level}))
	return logger, func() []map[string]any {
		var out []map[string]any
		for line := range strings.Lines(buf.String()) {
			var rec map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
			out = append(out, rec)
		}
		buf.Reset()
		return out
	}
}

func newLocker(t *testing.T, nodes []*memory.Node, opts ...core.Option) *core.Locker {
	l, err := core.New(memory.AsNodes(nodes), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	return l
}

func TestObserver(t *testing.T) {
	logger, records := capture(t, slog.LevelDebug)
	nodes := []*memory.Node{memory.New(memory.WithName("a")), memory.New(memory.WithName("b")), memory.New(memory.WithName("c"))}
	l := newLocker(t, nodes, core.WithObserver(logging.New(logger)), core.WithFencing(true), core.WithTries(1))

	lock, err := l.Acquire(t.Context(), "orders:42")
	require.NoError(t, err)
	_, err = l.TryAcquire(t.Context(), "orders:42")
	require.ErrorIs(t, err, core.ErrNotAcquired)
	require.NoError(t, lock.Extend(t.Context()))
	require.NoError(t, lock.Release(t.Context()))

	recs := records()
	require.Len(t, recs, 4)
	acq := recs[0]
	assert.Equal(t, "DEBUG", acq["level"])
	assert.Equal(t, "quorumlock acquire", acq["msg"])
	assert.Equal(t, "orders:42", acq["key"])
	assert.Equal(t, "ok", acq["outcome"])
	assert.EqualValues(t, 1, acq["tries"])
	assert.EqualValues(t, 1, acq["token"])
	assert.Contains(t, acq, "validity")
	assert.Contains(t, acq, "duration")
	assert.NotContains(t, acq, "nodes", "successes carry no node results by default")

	busy := recs[1]
	assert.Equal(t, "DEBUG", busy["level"], "contention is not a fault")
	assert.Equal(t, "contended", busy["outcome"])
	assert.Contains(t, busy["error"], "held by another owner")
	nodesAttr, ok := busy["nodes"].(map[string]any)
	require.True(t, ok, "a failure carries its nodes' results: %v", busy)
	assert.Equal(t, "refused", nodesAttr["a"].(map[string]any)["outcome"])
	assert.Len(t, nodesAttr, 3)

	assert.Equal(t, "quorumlock extend", recs[2]["msg"])
	assert.Equal(t, "quorumlock release", recs[3]["msg"])
	assert.Equal(t, "ok", recs[3]["outcome"])
}

func TestLevelsAndOptions(t *testing.T) {
	logger, records := capture(t, slog.LevelInfo)
	nodes := memory.NewNodes(1)
	l := newLocker(t, nodes, core.WithObserver(logging.New(logger, logging.WithKeys(false), logging.WithNodes(true))), core.WithTTL(time.Second))

	lock, err := l.Acquire(t.Context(), "secret")
	require.NoError(t, err)
	assert.Empty(t, records(), "successes log at Debug, below the handler's level")

	nodes[0].Del("secret")
	require.ErrorIs(t, lock.Extend(t.Context()), core.ErrLockLost)
	recs := records()
	require.Len(t, recs, 2, "the loss and the failed extension")
	assert.Equal(t, "ERROR", recs[0]["level"])
	assert.Equal(t, "quorumlock lost", recs[0]["msg"])
	assert.Equal(t, "lost", recs[0]["outcome"])
	assert.NotContains(t, recs[0], "key")
	assert.NotContains(t, recs[0], "duration")
	assert.Equal(t, "WARN", recs[1]["level"])
	assert.Equal(t, "quorumlock extend", recs[1]["msg"])
	assert.NotContains(t, recs[1], "key")

	logger2, records2 := capture(t, slog.LevelDebug)
	l2 := newLocker(t, memory.NewNodes(1), core.WithObserver(logging.New(logger2, logging.WithNodes(true), logging.WithLevels(slog.LevelInfo, slog.LevelInfo, slog.LevelWarn, slog.LevelError))))
	lock2, err := l2.TryAcquire(t.Context(), "k")
	require.NoError(t, err)
	recs = records2()
	require.Len(t, recs, 1)
	assert.Equal(t, "INFO", recs[0]["level"])
	assert.Contains(t, recs[0], "nodes", "WithNodes: successes carry their nodes too")
	require.NoError(t, lock2.Release(t.Context()))
}

// A later option overrides an earlier one, and a nil Option is skipped.
func TestOptionsOverride(t *testing.T) {
	logger, records := capture(t, slog.LevelDebug)
	l := newLocker(t, memory.NewNodes(1), core.WithObserver(logging.New(logger,
		logging.WithKeys(false), nil, logging.WithKeys(true), logging.WithNodes(true), logging.WithNodes(false))))
	lock, err := l.TryAcquire(t.Context(), "k")
	require.NoError(t, err)
	recs := records()
	require.Len(t, recs, 1)
	assert.Equal(t, "k", recs[0]["key"], "WithKeys(true) wins")
	assert.NotContains(t, recs[0], "nodes", "WithNodes(false) wins")
	require.NoError(t, lock.Release(t.Context()))
}

func TestNilLogger(t *testing.T) {
	assert.NotNil(t, logging.New(nil), "falls back to slog.Default")
}

// discard is a slog.Handler that drops the records of level and above,
// without the buffer pool of slog's handlers (which the race detector
// empties at random, so that they allocate under -race).
type discard slog.Level

func (h discard) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.Level(h) }
func (discard) Handle(context.Context, slog.Record) error      { return nil }
func (h discard) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h discard) WithGroup(string) slog.Handler                { return h }

// Observe runs on every acquisition, extension and release: a successful
// one, logged or not, allocates nothing of its own.
func TestObserveDoesNotAllocate(t *testing.T) {
	e := core.Event{Kind: core.OpAcquire, Key: "k", Duration: time.Millisecond, Tries: 1, Validity: time.Second,
		Nodes: []core.NodeResult{{Node: "a", Outcome: core.OutcomeOK}}}
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		obs := logging.New(slog.New(discard(level)))
		assert.Zero(t, testing.AllocsPerRun(100, func() { obs.Observe(t.Context(), e) }), "handler level %v", level)
	}
}

// An Acquire that waits out the restart guard says so, at Warn: the
// message a newcomer on fresh servers needs.
func TestWaitForTheRestartGuard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logger, records := capture(t, slog.LevelInfo)
		nodes := memory.NewNodes(3)
		l := newLocker(t, nodes, core.WithObserver(logging.New(logger)))
		for _, n := range nodes[:2] {
			n.Stop()
			n.Start() // empty, as a server without persistence restarts
		}
		lock, err := l.Acquire(t.Context(), "k")
		require.NoError(t, err)
		require.NoError(t, lock.Release(t.Context()))
		recs := records()
		require.Len(t, recs, 1, "the wait; the acquisition that followed logs at Debug")
		assert.Equal(t, "WARN", recs[0]["level"])
		assert.Equal(t, "quorumlock acquire waits for servers too young to vote (restart guard)", recs[0]["msg"])
		assert.Equal(t, "restarted", recs[0]["outcome"])
		assert.Equal(t, float64(l.RestartGuard()+core.MinRetryDelay), recs[0]["duration"])
		assert.Contains(t, recs[0]["error"], "node restarted recently")
		assert.NotContains(t, recs[0], "nodes", "the error names them already")
	})
}

// Each record names the kind of lock, even with the keys left out.
func TestLockKind(t *testing.T) {
	logger, records := capture(t, slog.LevelDebug)
	l := newLocker(t, memory.NewNodes(1), core.WithObserver(logging.New(logger, logging.WithKeys(false))))
	ctx := t.Context()
	mutex, err := l.Acquire(ctx, "m")
	require.NoError(t, err)
	multi, err := l.AcquireAll(ctx, "a", "b")
	require.NoError(t, err)
	shared, err := l.AcquireShared(ctx, "s")
	require.NoError(t, err)
	require.NoError(t, shared.Extend(ctx))
	for _, lock := range []*core.Lock{mutex, multi, shared} {
		require.NoError(t, lock.Release(ctx))
	}
	var got []string
	for _, rec := range records() {
		got = append(got, fmt.Sprint(rec["msg"], " ", rec["lock"]))
	}
	assert.Equal(t, []string{
		"quorumlock acquire mutex", "quorumlock acquire multi", "quorumlock acquire shared", "quorumlock extend shared",
		"quorumlock release mutex", "quorumlock release multi", "quorumlock release shared",
	}, got)
}
