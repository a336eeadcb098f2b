package tracing

import (
	"context"
	"errors"
	"net"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/quorumlock/quorumlock/core"
)

// startedKey is the context key under which Start keeps what it began,
// one per Observer, so that Observe ends its own span and not a caller's.
type startedKey struct{ t *Observer }

// started is the span Start began, and its operation: only that
// operation's event ends it (the restart guard's OpWait, observed
// with the same context while the acquisition goes on, must not).
type started struct {
	span trace.Span
	op   core.Op
}

// Start begins the span of an Acquire, TryAcquire, Extend or Release (see
// core.Observer): the returned context carries it, so the spans a driver
// makes for the operation's node calls (redisotel, rueidisotel,
// valkeyotel) are its children. Observe ends it. Other ops are ignored.
func (t *Observer) Start(ctx context.Context, op core.Op, key string) context.Context {
	name, spanKind, ok := spanOf(op)
	if !ok {
		return ctx
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(spanKind),
		trace.WithAttributes(t.keyAttrs(key, semconv.DBSystemNameRedis)...))
	return context.WithValue(ctx, startedKey{t}, &started{span, op})
}

// span returns the span Start began for the operation ctx belongs to, or
// a new one for events without a start (keep-alive extensions, losses).
func (t *Observer) span(ctx context.Context, e core.Event) (trace.Span, bool) {
	// Spans are compared by their IDs: span types need not be comparable
	// (the global provider's and noop's non-recording spans are not).
	if s, ok := ctx.Value(startedKey{t}).(*started); ok && s.op == e.Kind &&
		s.span.SpanContext().SpanID() == trace.SpanContextFromContext(ctx).SpanID() {
		return s.span, true
	}
	name, spanKind, ok := spanOf(e.Kind)
	if !ok {
		return nil, false
	}
	_, s := t.tracer.Start(ctx, name, trace.WithTimestamp(e.Start), trace.WithSpanKind(spanKind),
		trace.WithAttributes(t.keyAttrs(e.Key, semconv.DBSystemNameRedis)...))
	return s, true
}

// spanOf names the span of an op.
func spanOf(op core.Op) (string, trace.SpanKind, bool) {
	switch op {
	case core.OpAcquire:
		return SpanAcquire, trace.SpanKindClient, true
	case core.OpExtend:
		return SpanExtend, trace.SpanKindClient, true
	case core.OpRelease:
		return SpanRelease, trace.SpanKindClient, true
	case core.OpLost:
		return SpanLost, trace.SpanKindInternal, true
	}
	return "", 0, false
}

// keyAttrs returns attrs with the key's attribute as WithKeys says.
func (t *Observer) keyAttrs(key string, attrs ...attribute.KeyValue) []attribute.KeyValue {
	switch t.keys {
	case KeysPlain:
		attrs = append(attrs, KeyKey.String(key))
	case KeysHashed:
		attrs = append(attrs, KeyKey.String(HashKey(key)))
	}
	return attrs
}

// appendServerAttrs appends a node's name by the semantic conventions to
// attrs: server.address and server.port when its name is host:port, else
// server.address alone.
func appendServerAttrs(attrs []attribute.KeyValue, name string) []attribute.KeyValue {
	host, port, err := net.SplitHostPort(name)
	if err != nil {
		return append(attrs, semconv.ServerAddress(name))
	}
	attrs = append(attrs, semconv.ServerAddress(host))
	if p, err := strconv.Atoi(port); err == nil {
		attrs = append(attrs, semconv.ServerPort(p))
	}
	return attrs
}

// errorType is the error.type of a node's failure: a short class, core's
// Reason where it has one ("restarted", "canceled").
func errorType(err error) string {
	switch {
	case errors.Is(err, core.ErrNodeTimeout):
		return "timeout"
	case errors.Is(err, core.ErrDuplicateNode):
		return "duplicate_node"
	}
	switch r := core.Reason(err); r {
	case core.ReasonRestarted, core.ReasonCanceled:
		return r
	}
	return "node_failure"
}
