package tracing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/quorumlock/quorumlock/core"
)

// ScopeName is the instrumentation scope of the Observer's tracer.
const ScopeName = "github.com/quorumlock/quorumlock/middleware/tracing"

// The names of the spans, by event kind.
const (
	SpanAcquire = "quorumlock.acquire"
	SpanExtend  = "quorumlock.extend"
	SpanRelease = "quorumlock.release"
	SpanLost    = "quorumlock.lost"
)

// NodeEvent is the name of the span event that reports one node's result.
const NodeEvent = "quorumlock.node"

// The attribute keys the Observer sets (see the package doc).
const (
	KeyKey          = attribute.Key("quorumlock.key")
	KeyOutcome      = attribute.Key("quorumlock.outcome")
	KeyTries        = attribute.Key("quorumlock.tries")
	KeyToken        = attribute.Key("quorumlock.token")
	KeyValidityMS   = attribute.Key("quorumlock.validity_ms")
	KeyNodesOK      = attribute.Key("quorumlock.nodes.ok")
	KeyNodesRefused = attribute.Key("quorumlock.nodes.refused")
	KeyNodesFailed  = attribute.Key("quorumlock.nodes.failed")

	KeyNodeIndex     = attribute.Key("quorumlock.node.index")
	KeyNodeName      = attribute.Key("quorumlock.node.name")
	KeyNodeOutcome   = attribute.Key("quorumlock.node.outcome")
	KeyNodeLatencyMS = attribute.Key("quorumlock.node.latency_ms")
	KeyNodeError     = attribute.Key("quorumlock.node.error")
)

// Option configures an Observer.
type Option interface {
	apply(*options)
	// String shows the option as written, for logs and comparison.
	String() string
}

type keyMode uint8

const (
	keyPlain keyMode = iota
	keyHashed
	keyOmitted
)

type options struct {
	provider trace.TracerProvider
	keys     keyMode
}

type optionFunc struct {
	fn   func(*options)
	name string
}

func (o optionFunc) apply(opts *options) { o.fn(opts) }
func (o optionFunc) String() string      { return o.name }

// WithTracerProvider sets where the Observer's tracer comes from; nil keeps
// the default.
// Default: otel.GetTracerProvider(), the global provider, looked up once by
// New (a provider set globally later is still used: the global one
// delegates to it).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc{func(o *options) {
		if tp != nil {
			o.provider = tp
		}
	}, "WithTracerProvider(...)"}
}

// WithoutKeys leaves the quorumlock.key attribute out, for keys that carry
// data the traces must not; error texts, which quote the key, are left out
// too (see the package doc's Status).
// Default: keys are recorded as given.
func WithoutKeys() Option {
	return optionFunc{func(o *options) { o.keys = keyOmitted }, "WithoutKeys()"}
}

// WithHashedKeys records HashKey(key) as the quorumlock.key attribute
// instead of the key, so that the spans of one key can still be found
// together; error texts, which quote the key, are left out (see the
// package doc's Status). A hash does not hide a key that can be guessed:
// use WithoutKeys for those.
// Default: keys are recorded as given.
func WithHashedKeys() Option {
	return optionFunc{func(o *options) { o.keys = keyHashed }, "WithHashedKeys()"}
}

// HashKey returns the hash WithHashedKeys records for key: the first 8
// bytes of its SHA-256, in 16 hexadecimal digits.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

// Observer is a core.Observer that records each event as a span (see the
// package doc). It is safe for concurrent use.
type Observer struct {
	tracer trace.Tracer
	keys   keyMode
}

var _ core.Observer = (*Observer)(nil)

// New returns an Observer configured by opts.
func New(opts ...Option) *Observer {
	o := options{}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	if o.provider == nil {
		o.provider = otel.GetTracerProvider()
	}
	return &Observer{tracer: o.provider.Tracer(ScopeName), keys: o.keys}
}

// Observe records e as a span whose parent is the span in ctx, for
// core.Observer. Events of a kind it does not know are ignored.
func (t *Observer) Observe(ctx context.Context, e core.Event) {
	name, kind := SpanAcquire, trace.SpanKindClient
	switch e.Kind {
	case core.EventAcquire:
	case core.EventExtend:
		name = SpanExtend
	case core.EventRelease:
		name = SpanRelease
	case core.EventLost:
		name, kind = SpanLost, trace.SpanKindInternal
	default:
		return
	}
	_, span := t.tracer.Start(ctx, name, trace.WithTimestamp(e.Start), trace.WithSpanKind(kind))
	end := e.Start.Add(e.Duration)
	defer span.End(trace.WithTimestamp(end))
	if !span.IsRecording() {
		return
	}

	outcome := core.Reason(e.Err)
	attrs := make([]attribute.KeyValue, 0, 8)
	switch t.keys {
	case keyPlain:
		attrs = append(attrs, KeyKey.String(e.Key))
	case keyHashed:
		attrs = append(attrs, KeyKey.String(HashKey(e.Key)))
	}
	attrs = append(attrs, KeyOutcome.String(outcome))
	if e.Tries > 0 {
		attrs = append(attrs, KeyTries.Int(e.Tries))
	}
	if e.Token != 0 {
		attrs = append(attrs, KeyToken.Int64(e.Token))
	}
	if e.Err == nil && e.Validity > 0 {
		attrs = append(attrs, KeyValidityMS.Int64(e.Validity.Milliseconds()))
	}
	if e.Nodes != nil {
		var ok, refused, failed int
		for i := range e.Nodes {
			switch e.Nodes[i].Outcome {
			case core.OutcomeOK:
				ok++
			case core.OutcomeRefused:
				refused++
			case core.OutcomeFailed:
				failed++
			}
		}
		attrs = append(attrs, KeyNodesOK.Int(ok), KeyNodesRefused.Int(refused), KeyNodesFailed.Int(failed))
	}
	span.SetAttributes(attrs...)

	for i := range e.Nodes {
		n := &e.Nodes[i]
		na := []attribute.KeyValue{
			KeyNodeIndex.Int(n.Index),
			KeyNodeName.String(n.Node),
			KeyNodeOutcome.String(n.Outcome.String()),
			KeyNodeLatencyMS.Float64(float64(n.Latency) / float64(time.Millisecond)),
		}
		if n.Err != nil {
			na = append(na, KeyNodeError.String(n.Err.Error()))
		}
		span.AddEvent(NodeEvent, trace.WithTimestamp(end), trace.WithAttributes(na...))
	}

	if e.Err != nil {
		if t.keys == keyPlain {
			span.RecordError(e.Err, trace.WithTimestamp(end))
			span.SetStatus(codes.Error, e.Err.Error())
		} else {
			span.SetStatus(codes.Error, outcome)
		}
	}
}
