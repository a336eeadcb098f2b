package tracing_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/extra/redisotel/v9"
	goredislib "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/middleware/tracing"
)

// A driver's own spans (here redisotel's, on go-redis clients of three
// real servers) are children of quorumlock's span of the operation that
// made the calls: Start gives core the context the node calls run with.
func TestDriverSpansNest(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })

	nodes := make([]core.Node, 3)
	for i := range nodes {
		srv, err := redistest.StartServer(t.Context())
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, srv.Close()) })
		rdb := goredislib.NewClient(goredis.ClientOptions(srv.Addr()))
		require.NoError(t, redisotel.InstrumentTracing(rdb, redisotel.WithTracerProvider(tp)))
		node, err := goredis.New(rdb, goredis.WithCloseClient(true))
		require.NoError(t, err)
		nodes[i] = node
	}
	l, err := core.New(nodes, core.WithObserver(tracing.New(tracing.WithTracerProvider(tp))))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.Close()) })

	ctx, request := tp.Tracer("test").Start(t.Context(), "request")
	lock, err := l.Acquire(ctx, "orders:42")
	require.NoError(t, err)
	require.NoError(t, lock.Release(ctx))
	request.End()

	spans := exp.GetSpans()
	t.Log("\n" + tree(spans))
	for _, name := range []string{tracing.SpanAcquire, tracing.SpanRelease} {
		op := only(t, spans, name)
		assert.Equal(t, request.SpanContext().SpanID(), op.Parent.SpanID(), "%s is a child of the caller's span", name)
		var children []tracetest.SpanStub
		for _, s := range spans {
			if s.Parent.SpanID() == op.SpanContext.SpanID() {
				children = append(children, s)
			}
		}
		servers := map[string]bool{}
		for _, c := range children {
			assert.Equal(t, "github.com/redis/go-redis/extra/redisotel", c.InstrumentationScope.Name, "%s: a driver's span", c.Name)
			for _, kv := range c.Attributes {
				if kv.Key == "server.address" || kv.Key == "server.port" {
					servers[string(kv.Key)+"="+kv.Value.String()] = true
				}
			}
			assert.False(t, c.StartTime.Before(op.StartTime), "%s starts within %s", c.Name, name)
			assert.False(t, c.EndTime.After(op.EndTime), "%s ends within %s", c.Name, name)
		}
		assert.GreaterOrEqual(t, len(children), 3, "%s: one driver span per node at least", name)
		assert.Len(t, servers, 4, "%s: the driver's spans name the three servers (one address, three ports): %v", name, servers)
		attrs := attrs(op.Attributes)
		assert.Equal(t, "redis", attrs["db.system.name"].AsString())
		assert.Equal(t, "orders:42", attrs[tracing.KeyKey].AsString())
	}
}

// only returns the one span named name.
func only(t *testing.T, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			found = append(found, s)
		}
	}
	require.Len(t, found, 1, "spans named %s", name)
	return found[0]
}

// tree prints spans as an indented tree, children under their parent,
// with their duration.
func tree(spans tracetest.SpanStubs) string {
	var b strings.Builder
	var walk func(parent trace.SpanID, depth int)
	walk = func(parent trace.SpanID, depth int) {
		for _, s := range spans {
			if s.Parent.SpanID() == parent {
				fmt.Fprintf(&b, "%s%s (%s)\n", strings.Repeat("  ", depth), s.Name, s.EndTime.Sub(s.StartTime).Round(time.Microsecond))
				walk(s.SpanContext.SpanID(), depth+1)
			}
		}
	}
	walk(trace.SpanID{}, 0)
	return b.String()
}
