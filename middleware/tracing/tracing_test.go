package tracing_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/middleware/tracing"
)

// namedNodes returns memory nodes named a, b, c, ...
func namedNodes(n int) []*memory.Node {
	nodes := make([]*memory.Node, n)
	for i := range nodes {
		nodes[i] = memory.New(memory.WithName(string(rune('a' + i))))
	}
	return nodes
}

// setup returns a Locker over nodes that traces to a span recorder, and a
// context holding a parent span.
func setup(t *testing.T, nodes []*memory.Node, opts ...tracing.Option) (*core.Locker, *tracetest.SpanRecorder, context.Context, trace.Span) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	l, err := core.New(memory.AsNodes(nodes), core.WithFencing(true),
		core.WithObserver(tracing.New(append([]tracing.Option{tracing.WithTracerProvider(tp)}, opts...)...)))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	ctx, parent := tp.Tracer("test").Start(t.Context(), "request")
	t.Cleanup(func() { parent.End() })
	return l, rec, ctx, parent
}

// attrs returns a span's attributes as a map.
func attrs(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	out := make(map[attribute.Key]attribute.Value, len(kvs))
	for _, kv := range kvs {
		out[kv.Key] = kv.Value
	}
	return out
}

// take returns the spans ended since the last call, but the test's parent.
func take(rec *tracetest.SpanRecorder, seen *int) []sdktrace.ReadOnlySpan {
	all := rec.Ended()
	out := all[*seen:]
	*seen = len(all)
	return out
}

func TestAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes := namedNodes(3)
		l, rec, ctx, parent := setup(t, nodes)
		// Node b answers 2 ms late, twice at its first yes (its identity
		// is asked too).
		nodes[1].SetLatency(2 * time.Millisecond)
		start := time.Now()
		lock, err := l.Acquire(ctx, "job")
		require.NoError(t, err)
		end := start.Add(4 * time.Millisecond)

		spans := rec.Ended()
		require.Len(t, spans, 1)
		s := spans[0]
		assert.Equal(t, tracing.SpanAcquire, s.Name())
		assert.Equal(t, trace.SpanKindClient, s.SpanKind())
		assert.Equal(t, parent.SpanContext().TraceID(), s.SpanContext().TraceID())
		assert.Equal(t, parent.SpanContext().SpanID(), s.Parent().SpanID())
		assert.Equal(t, start, s.StartTime())
		assert.Equal(t, end, s.EndTime())
		assert.Equal(t, tracing.ScopeName, s.InstrumentationScope().Name)
		assert.Equal(t, codes.Unset, s.Status().Code)
		validity := core.DefaultTTL - 4*time.Millisecond - l.Drift()
		assert.Equal(t, map[attribute.Key]attribute.Value{
			"db.system.name":        attribute.StringValue("redis"),
			tracing.KeyKey:          attribute.StringValue("job"),
			tracing.KeyLock:         attribute.StringValue("mutex"),
			tracing.KeyOutcome:      attribute.StringValue("ok"),
			tracing.KeyTries:        attribute.IntValue(1),
			tracing.KeyToken:        attribute.Int64Value(lock.Token()),
			tracing.KeyValidityMS:   attribute.Int64Value(validity.Milliseconds()),
			tracing.KeyNodesOK:      attribute.IntValue(3),
			tracing.KeyNodesRefused: attribute.IntValue(0),
			tracing.KeyNodesFailed:  attribute.IntValue(0),
		}, attrs(s.Attributes()))
		assert.Equal(t, int64(1), lock.Token())

		events := s.Events()
		require.Len(t, events, 3)
		for i, ev := range events {
			assert.Equal(t, tracing.NodeEvent, ev.Name)
			assert.Equal(t, end, ev.Time)
			a := attrs(ev.Attributes)
			assert.Equal(t, int64(i), a[tracing.KeyNodeIndex].AsInt64())
			assert.Equal(t, nodes[i].String(), a[tracing.KeyNodeName].AsString())
			assert.Equal(t, nodes[i].String(), a["server.address"].AsString(), "a name that is no host:port is the address")
			assert.Equal(t, "ok", a[tracing.KeyNodeOutcome].AsString())
			assert.NotContains(t, a, tracing.KeyNodeError)
		}
		assert.Equal(t, 4.0, attrs(events[1].Attributes)[tracing.KeyNodeLatencyMS].AsFloat64())
		assert.Equal(t, 0.0, attrs(events[0].Attributes)[tracing.KeyNodeLatencyMS].AsFloat64())
		require.NoError(t, lock.Release(ctx))
	})
}

func TestContended(t *testing.T) {
	nodes := namedNodes(3)
	l, rec, ctx, parent := setup(t, nodes)
	for _, n := range nodes {
		n.Set("job", "rival", time.Hour)
	}
	_, err := l.TryAcquire(ctx, "job")
	require.ErrorIs(t, err, core.ErrNotAcquired)

	spans := rec.Ended()
	require.Len(t, spans, 1)
	s := spans[0]
	assert.Equal(t, tracing.SpanAcquire, s.Name())
	assert.Equal(t, parent.SpanContext().SpanID(), s.Parent().SpanID())
	assert.Equal(t, sdktrace.Status{Code: codes.Error, Description: err.Error()}, s.Status(), "contention is an error too")
	a := attrs(s.Attributes())
	assert.Equal(t, "contended", a[tracing.KeyOutcome].AsString())
	assert.Equal(t, int64(3), a[tracing.KeyNodesRefused].AsInt64())
	assert.Equal(t, int64(1), a[tracing.KeyTries].AsInt64())
	assert.NotContains(t, a, tracing.KeyToken)
	assert.NotContains(t, a, tracing.KeyValidityMS)
	var exceptions, nodeEvents int
	for _, ev := range s.Events() {
		switch ev.Name {
		case "exception":
			exceptions++
			assert.Equal(t, err.Error(), attrs(ev.Attributes)["exception.message"].AsString())
		case tracing.NodeEvent:
			nodeEvents++
			assert.Equal(t, "refused", attrs(ev.Attributes)[tracing.KeyNodeOutcome].AsString())
		}
	}
	assert.Equal(t, 1, exceptions)
	assert.Equal(t, 3, nodeEvents)
}

func TestExtendReleaseLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes := namedNodes(3)
		l, rec, ctx, parent := setup(t, nodes)
		seen := 0
		acquired := time.Now()
		nodes[0].SetLatency(20 * time.Millisecond) // the bubble's clock moves on
		lock, err := l.Acquire(ctx, "job")
		require.NoError(t, err)
		nodes[0].SetLatency(0)
		take(rec, &seen)

		start := time.Now()
		require.Equal(t, acquired.Add(40*time.Millisecond), start, "node a's SET, then its identity")
		require.NoError(t, lock.Extend(ctx))
		spans := take(rec, &seen)
		require.Len(t, spans, 1)
		ext := spans[0]
		assert.Equal(t, tracing.SpanExtend, ext.Name())
		assert.Equal(t, trace.SpanKindClient, ext.SpanKind())
		assert.Equal(t, parent.SpanContext().SpanID(), ext.Parent().SpanID())
		assert.Equal(t, start, ext.StartTime())
		assert.Equal(t, start, ext.EndTime(), "no time passes in the bubble")
		assert.Equal(t, codes.Unset, ext.Status().Code)
		a := attrs(ext.Attributes())
		assert.Equal(t, "ok", a[tracing.KeyOutcome].AsString())
		assert.Equal(t, (core.DefaultTTL - l.Drift()).Milliseconds(), a[tracing.KeyValidityMS].AsInt64())
		assert.NotContains(t, a, tracing.KeyTries)

		// The key vanishes: the next extension finds the lock lost.
		for _, n := range nodes {
			n.Del("job")
		}
		require.ErrorIs(t, lock.Extend(ctx), core.ErrLockLost)
		spans = take(rec, &seen)
		require.Len(t, spans, 2)
		lost, ext := spans[0], spans[1]
		assert.Equal(t, tracing.SpanLost, lost.Name())
		assert.Equal(t, trace.SpanKindInternal, lost.SpanKind())
		assert.False(t, lost.Parent().IsValid(), "a loss has no caller")
		assert.Equal(t, lost.StartTime(), lost.EndTime())
		assert.Equal(t, codes.Error, lost.Status().Code)
		assert.Equal(t, "lost", attrs(lost.Attributes())[tracing.KeyOutcome].AsString())
		require.Len(t, lost.Events(), 1, "a loss asks no node: only the error")
		assert.Equal(t, "exception", lost.Events()[0].Name)
		assert.Equal(t, tracing.SpanExtend, ext.Name())
		assert.Equal(t, parent.SpanContext().SpanID(), ext.Parent().SpanID())
		assert.Equal(t, codes.Error, ext.Status().Code)
		a = attrs(ext.Attributes())
		assert.Equal(t, "lost", a[tracing.KeyOutcome].AsString())
		assert.Equal(t, int64(3), a[tracing.KeyNodesRefused].AsInt64())
		assert.NotContains(t, a, tracing.KeyValidityMS)

		// Released after the loss, with a node down.
		nodes[2].Stop()
		require.ErrorIs(t, lock.Release(ctx), core.ErrNotHeld)
		spans = take(rec, &seen)
		require.Len(t, spans, 1)
		rel := spans[0]
		assert.Equal(t, tracing.SpanRelease, rel.Name())
		assert.Equal(t, trace.SpanKindClient, rel.SpanKind())
		assert.Equal(t, parent.SpanContext().SpanID(), rel.Parent().SpanID())
		assert.Equal(t, codes.Error, rel.Status().Code)
		a = attrs(rel.Attributes())
		assert.Equal(t, "not_held", a[tracing.KeyOutcome].AsString())
		assert.Equal(t, int64(1), a[tracing.KeyNodesFailed].AsInt64())
		var failed []map[attribute.Key]attribute.Value
		for _, ev := range rel.Events() {
			if a := attrs(ev.Attributes); ev.Name == tracing.NodeEvent && a[tracing.KeyNodeOutcome].AsString() == "failed" {
				failed = append(failed, a)
			}
		}
		require.Len(t, failed, 1)
		assert.Equal(t, "c", failed[0][tracing.KeyNodeName].AsString())
		assert.Equal(t, "node_failure", failed[0]["error.type"].AsString())
		assert.Equal(t, "not_held", a["error.type"].AsString(), "the span's error.type is its outcome")
		assert.Equal(t, memory.ErrDown.Error(), failed[0][tracing.KeyNodeError].AsString())
	})
}

func TestKeys(t *testing.T) {
	for name, mode := range map[string]tracing.KeyMode{
		"without keys": tracing.KeysOmitted,
		"unknown mode": tracing.KeyMode(7), // taken as KeysOmitted
	} {
		t.Run(name, func(t *testing.T) {
			nodes := namedNodes(1)
			l, rec, ctx, _ := setup(t, nodes, tracing.WithKeys(mode))
			nodes[0].Set("secret", "rival", time.Hour)
			_, err := l.TryAcquire(ctx, "secret")
			require.ErrorIs(t, err, core.ErrNotAcquired)
			require.Len(t, rec.Ended(), 1)
			s := rec.Ended()[0]
			assert.NotContains(t, attrs(s.Attributes()), tracing.KeyKey)
			assert.Equal(t, sdktrace.Status{Code: codes.Error, Description: "contended"}, s.Status(), "the error text quotes the key")
			for _, ev := range s.Events() {
				assert.Equal(t, tracing.NodeEvent, ev.Name, "no exception event")
			}
		})
	}
	t.Run("plain keys win when given last", func(t *testing.T) {
		l, rec, ctx, _ := setup(t, namedNodes(1), tracing.WithKeys(tracing.KeysOmitted), nil, tracing.WithKeys(tracing.KeysPlain))
		lock, err := l.Acquire(ctx, "k")
		require.NoError(t, err)
		require.NoError(t, lock.Release(ctx))
		require.Len(t, rec.Ended(), 2)
		for _, s := range rec.Ended() {
			assert.Equal(t, "k", attrs(s.Attributes())[tracing.KeyKey].AsString())
		}
	})
	t.Run("hashed keys", func(t *testing.T) {
		l, rec, ctx, _ := setup(t, namedNodes(1), tracing.WithKeys(tracing.KeysHashed))
		lock, err := l.Acquire(ctx, "secret")
		require.NoError(t, err)
		require.NoError(t, lock.Release(ctx))
		spans := rec.Ended()
		require.Len(t, spans, 2)
		for _, s := range spans {
			assert.Equal(t, tracing.HashKey("secret"), attrs(s.Attributes())[tracing.KeyKey].AsString())
		}
		assert.Len(t, tracing.HashKey("secret"), 16)
		assert.NotEqual(t, tracing.HashKey("secret"), tracing.HashKey("secret2"))
	})
}

// Spans need not be comparable: the global provider's and noop's
// non-recording spans are structs holding a SpanContext, which Go cannot
// compare, and an Observer over them must neither panic nor record.
func TestProviderWithUncomparableSpans(t *testing.T) {
	l, err := core.New(memory.AsNodes(memory.NewNodes(3)),
		core.WithObserver(tracing.New(tracing.WithTracerProvider(noop.NewTracerProvider()))))
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Close()) }()
	ctx, parent := noop.NewTracerProvider().Tracer("test").Start(t.Context(), "request")
	defer parent.End()
	lock, err := l.Acquire(ctx, "k")
	require.NoError(t, err)
	require.NoError(t, lock.Extend(ctx))
	require.NoError(t, lock.Release(ctx))
}

// The restart guard's wait (core.OpWait), observed with the context of
// the acquisition that waits, gets no span and does not end the
// acquisition's: that span ends when Acquire returns, with its outcome.
func TestRestartGuardWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes := namedNodes(3)
		l, rec, ctx, parent := setup(t, nodes)
		for _, n := range nodes[:2] {
			n.Stop()
			n.Start() // empty, as a server without persistence restarts
		}
		start := time.Now()
		lock, err := l.Acquire(ctx, "k")
		require.NoError(t, err)
		took := time.Since(start)
		require.Greater(t, took, l.RestartGuard(), "the acquisition waited for the young nodes")

		spans := rec.Ended()
		require.Len(t, spans, 1, "the acquisition's span alone")
		s := spans[0]
		assert.Equal(t, tracing.SpanAcquire, s.Name())
		assert.Equal(t, parent.SpanContext().SpanID(), s.Parent().SpanID())
		assert.Equal(t, "ok", attrs(s.Attributes())[tracing.KeyOutcome].AsString())
		assert.Equal(t, codes.Unset, s.Status().Code)
		assert.Equal(t, took, s.EndTime().Sub(s.StartTime()), "the span covers the wait")
		require.NoError(t, lock.Release(ctx))
	})
}

func TestProvider(t *testing.T) {
	t.Run("the global provider by default", func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		defer func() { require.NoError(t, tp.Shutdown(context.Background())) }()
		// The global provider is left set: every other test gives its own.
		otel.SetTracerProvider(tp)
		obs := tracing.New(tracing.WithTracerProvider(nil)) // nil keeps the default
		obs.Observe(t.Context(), core.Event{Kind: core.OpRelease, Key: "k", Start: time.Now()})
		require.Len(t, rec.Ended(), 1)
		assert.Equal(t, tracing.SpanRelease, rec.Ended()[0].Name())
	})
	t.Run("nil keeps the provider an earlier option set", func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		defer func() { require.NoError(t, tp.Shutdown(context.Background())) }()
		obs := tracing.New(tracing.WithTracerProvider(tp), tracing.WithTracerProvider(nil))
		obs.Observe(t.Context(), core.Event{Kind: core.OpRelease, Key: "k", Start: time.Now()})
		require.Len(t, rec.Ended(), 1)
	})
	t.Run("spans not sampled", func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.NeverSample()))
		defer func() { require.NoError(t, tp.Shutdown(context.Background())) }()
		obs := tracing.New(tracing.WithTracerProvider(tp))
		obs.Observe(t.Context(), core.Event{Kind: core.OpAcquire, Key: "k", Start: time.Now(), Nodes: []core.NodeResult{{Outcome: core.OutcomeOK}}})
		assert.Empty(t, rec.Ended())
	})
	t.Run("unknown kinds are ignored", func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		defer func() { require.NoError(t, tp.Shutdown(context.Background())) }()
		tracing.New(tracing.WithTracerProvider(tp)).Observe(t.Context(), core.Event{Kind: "unknown"})
		assert.Empty(t, rec.Ended())
	})
	t.Run("String", func(t *testing.T) {
		assert.Equal(t, "WithKeys(KeysOmitted)", tracing.WithKeys(tracing.KeysOmitted).String())
		assert.Equal(t, "WithKeys(KeysHashed)", tracing.WithKeys(tracing.KeysHashed).String())
		assert.Equal(t, "WithKeys(KeysPlain)", tracing.WithKeys(tracing.KeysPlain).String())
		assert.Equal(t, "WithKeys(KeyMode(7))", tracing.WithKeys(7).String())
		assert.Equal(t, "WithTracerProvider(nil)", tracing.WithTracerProvider(nil).String())
		assert.Equal(t, "WithTracerProvider(...)", tracing.WithTracerProvider(otel.GetTracerProvider()).String())
	})
}

// Every span names its kind of lock, even with the keys left out.
func TestLockKinds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, rec, ctx, _ := setup(t, namedNodes(3), tracing.WithKeys(tracing.KeysOmitted))
		multi, err := l.AcquireAll(ctx, "a", "b")
		require.NoError(t, err)
		shared, err := l.AcquireShared(ctx, "s")
		require.NoError(t, err)
		_, err = l.TryAcquire(ctx, "s")
		require.ErrorIs(t, err, core.ErrNotAcquired)
		require.NoError(t, shared.Extend(ctx))
		require.NoError(t, multi.Release(ctx))
		require.NoError(t, shared.Release(ctx))

		var got []string
		for _, s := range rec.Ended() {
			got = append(got, s.Name()+" "+attrs(s.Attributes())[tracing.KeyLock].String())
		}
		assert.Equal(t, []string{
			"quorumlock.acquire multi", "quorumlock.acquire shared", "quorumlock.acquire mutex",
			"quorumlock.extend shared", "quorumlock.release multi", "quorumlock.release shared",
		}, got)
	})
}
