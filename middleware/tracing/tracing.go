package tracing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
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
	KeyLock         = attribute.Key("quorumlock.lock")
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

// Option configures an Observer. Options apply in order, a later one
// overriding an earlier one of the same kind; a nil Option is skipped.
type Option interface {
	apply(*options)
	// String shows the option as written, for logs and comparison.
	String() string
}

// KeyMode says how the Observer records lock keys: WithKeys takes one.
type KeyMode uint8

// The modes of WithKeys.
const (
	// KeysPlain records each key as given to Acquire, in the
	// quorumlock.key attribute and in error texts.
	KeysPlain KeyMode = iota
	// KeysHashed records HashKey(key) as the quorumlock.key attribute
	// instead of the key, so that the spans of one key can still be found
	// together, and leaves error texts out.
	KeysHashed
	// KeysOmitted leaves the quorumlock.key attribute and error texts out.
	KeysOmitted
)

// String returns the mode's name, such as "KeysHashed", or "KeyMode(n)"
// for a value that is none of the three.
func (m KeyMode) String() string {
	switch m {
	case KeysPlain:
		return "KeysPlain"
	case KeysHashed:
		return "KeysHashed"
	case KeysOmitted:
		return "KeysOmitted"
	default:
		return "KeyMode(" + strconv.Itoa(int(m)) + ")"
	}
}

type options struct {
	provider trace.TracerProvider
	keys     KeyMode
}

type optionFunc struct {
	fn   func(*options)
	name string
}

func (o optionFunc) apply(opts *options) { o.fn(opts) }
func (o optionFunc) String() string      { return o.name }

// WithTracerProvider sets where the Observer's tracer comes from. A nil tp
// changes nothing: the provider stays the default (or the one an earlier
// option set). Every value is valid.
// Default: otel.GetTracerProvider(), the global provider, looked up once by
// New (a provider set globally later is still used: the global one
// delegates to it).
func WithTracerProvider(tp trace.TracerProvider) Option {
	if tp == nil {
		return optionFunc{func(*options) {}, "WithTracerProvider(nil)"}
	}
	return optionFunc{func(o *options) { o.provider = tp }, "WithTracerProvider(...)"}
}

// WithKeys sets how lock keys are recorded: as given (KeysPlain), hashed
// (KeysHashed: HashKey(key) in the quorumlock.key attribute, so that the
// spans of one key can still be found together), or not at all
// (KeysOmitted), for keys that carry data the traces must not. With
// KeysHashed and KeysOmitted, error texts, which quote the key, are left
// out too (see the package doc's Status). A hash does not hide a key that
// can be guessed: use KeysOmitted for those.
// Default: KeysPlain.
// New has no error to return: a mode that is none of the three is taken
// as KeysOmitted, the one that leaks nothing.
func WithKeys(mode KeyMode) Option {
	keys := mode
	if keys > KeysOmitted {
		keys = KeysOmitted
	}
	return optionFunc{func(o *options) { o.keys = keys }, "WithKeys(" + mode.String() + ")"}
}

// HashKey returns the hash WithKeys(KeysHashed) records for key: the first
// 8 bytes of its SHA-256, in 16 hexadecimal digits.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

// Observer is a core.Observer that records each event as a span (see the
// package doc). It is safe for concurrent use.
type Observer struct {
	tracer trace.Tracer
	keys   KeyMode
}

var _ core.Observer = (*Observer)(nil)

// New returns an Observer configured by opts; it skips a nil Option.
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

// Observe ends the span Start began for e's operation, with e's
// attributes; an event without a start gets a span of its own, child of
// the span in ctx. Events of a kind it does not know are ignored.
func (t *Observer) Observe(ctx context.Context, e core.Event) {
	span, ok := t.span(ctx, e)
	if !ok {
		return
	}
	end := e.Start.Add(e.Duration)
	defer span.End(trace.WithTimestamp(end))
	if !span.IsRecording() {
		return
	}

	outcome := core.Reason(e.Err)
	span.SetAttributes(eventAttrs(e, outcome)...)
	for i := range e.Nodes {
		span.AddEvent(NodeEvent, trace.WithTimestamp(end), trace.WithAttributes(nodeAttrs(&e.Nodes[i])...))
	}
	if e.Err != nil {
		if t.keys == KeysPlain {
			span.RecordError(e.Err, trace.WithTimestamp(end))
			span.SetStatus(codes.Error, e.Err.Error())
		} else {
			span.SetStatus(codes.Error, outcome)
		}
	}
}

// eventAttrs are the attributes of e's span: its outcome and kind of lock;
// its tries, token and validity where set; and how many nodes answered
// each way.
func eventAttrs(e core.Event, outcome string) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 9)
	attrs = append(attrs, KeyOutcome.String(outcome))
	if e.Lock != "" {
		attrs = append(attrs, KeyLock.String(e.Lock))
	}
	if e.Err != nil {
		attrs = append(attrs, semconv.ErrorTypeKey.String(outcome))
	}
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
	return attrs
}

// nodeAttrs are the attributes of one node's answer, a NodeEvent.
func nodeAttrs(n *core.NodeResult) []attribute.KeyValue {
	na := append(appendServerAttrs(make([]attribute.KeyValue, 0, 8), n.Node),
		KeyNodeIndex.Int(n.Index),
		KeyNodeName.String(n.Node),
		KeyNodeOutcome.String(n.Outcome.String()),
		KeyNodeLatencyMS.Float64(float64(n.Latency)/float64(time.Millisecond)),
	)
	if n.Err != nil {
		na = append(na, semconv.ErrorTypeKey.String(errorType(n.Err)), KeyNodeError.String(n.Err.Error()))
	}
	return na
}
