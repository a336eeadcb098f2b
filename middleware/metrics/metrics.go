package metrics

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quorumlock/quorumlock/core"
)

// DefaultNamespace is the namespace prefixed to every metric name.
const DefaultNamespace = "quorumlock"

// DefaultBuckets returns the default buckets of the acquisition duration
// histogram, in seconds: from 0.5 ms, a fast local round, to 10 s, the
// default TTL, which bounds any sensible wait. Each call returns a new
// slice.
func DefaultBuckets() []float64 {
	return []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
}

// Option configures an Observer. Options apply in order, a later one
// overriding an earlier one of the same kind; a nil Option is skipped.
type Option interface {
	apply(*options)
	// String shows the option as written, for logs and comparison.
	String() string
}

type options struct {
	namespace   string
	constLabels prometheus.Labels
	buckets     []float64
}

type optionFunc struct {
	fn   func(*options)
	name string
}

func (o optionFunc) apply(opts *options) { o.fn(opts) }
func (o optionFunc) String() string      { return o.name }

// WithNamespace sets the prefix of every metric name; "" leaves the names
// unprefixed (acquire_duration_seconds, ...).
// Default: DefaultNamespace ("quorumlock").
// New takes any value; a namespace Prometheus refuses makes the
// Registerer's Register return an error.
func WithNamespace(ns string) Option {
	return optionFunc{func(o *options) { o.namespace = ns }, fmt.Sprintf("WithNamespace(%q)", ns)}
}

// WithConstLabels sets labels with fixed values on every metric, for
// instance to tell apart the Lockers of one process, each with its own
// Observer. The map is copied. A nil or empty map changes nothing: the
// labels stay the default (or those an earlier option set).
// Default: none.
// New takes any labels; a label name Prometheus refuses, or one of the
// metrics' own (outcome, op, lock, node), makes the Registerer's Register
// return an error.
func WithConstLabels(labels prometheus.Labels) Option {
	name := "WithConstLabels(" + labelsString(labels) + ")"
	if len(labels) == 0 {
		return optionFunc{func(*options) {}, name}
	}
	labels = maps.Clone(labels)
	return optionFunc{func(o *options) { o.constLabels = labels }, name}
}

// WithBuckets sets the upper bounds, in seconds, of the acquisition
// duration histogram's buckets. The slice is copied. No bucket (a nil or
// empty slice) changes nothing: the buckets stay the default (or those an
// earlier option set).
// Default: DefaultBuckets(), 0.5 ms to 10 s.
// Bounds that are not strictly increasing make New return an error
// matching core.ErrInvalidArgument, where prometheus.NewHistogram would
// panic.
func WithBuckets(buckets ...float64) Option {
	bounds := make([]string, len(buckets))
	for i, b := range buckets {
		bounds[i] = strconv.FormatFloat(b, 'g', -1, 64)
	}
	name := "WithBuckets(" + strings.Join(bounds, ", ") + ")"
	if len(buckets) == 0 {
		return optionFunc{func(*options) {}, name}
	}
	buckets = slices.Clone(buckets)
	return optionFunc{func(o *options) { o.buckets = buckets }, name}
}

// labelsString shows labels as Go source: nil, or prometheus.Labels{...}
// with the names sorted.
func labelsString(labels prometheus.Labels) string {
	if labels == nil {
		return "nil"
	}
	pairs := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		pairs = append(pairs, strconv.Quote(k)+": "+strconv.Quote(labels[k]))
	}
	return "prometheus.Labels{" + strings.Join(pairs, ", ") + "}"
}

// The event kinds, lock kinds and reasons, as indexes into the cached
// series.
var (
	ops     = [...]core.Op{core.OpAcquire, core.OpExtend, core.OpRelease, core.OpLost}
	locks   = [...]string{"mutex", "multi", "shared", "semaphore", "leader", "other"}
	reasons = [...]string{
		core.ReasonOK, core.ReasonContended, core.ReasonUnavailable, core.ReasonExpired, core.ReasonLost,
		core.ReasonNotHeld, core.ReasonCanceled, core.ReasonClosed, core.ReasonInvalid, core.ReasonRestarted, core.ReasonOther,
	}
)

const (
	nOps     = len(ops)
	nLocks   = len(locks)
	nReasons = len(reasons)
)

// opIndex returns k's index in ops, or -1.
func opIndex(k core.Op) int {
	for i, op := range ops {
		if op == k {
			return i
		}
	}
	return -1
}

// lockIndex returns the index in locks of an Event's Lock: "" (an event
// built before Event.Lock existed) is a mutex, a kind this package does
// not know "other".
func lockIndex(lock string) int {
	if lock == "" {
		return 0
	}
	for i, s := range locks {
		if s == lock {
			return i
		}
	}
	return nLocks - 1
}

// reasonIndex returns the index in reasons of core.Reason(err).
func reasonIndex(err error) int {
	if err == nil {
		return 0
	}
	r := core.Reason(err)
	for i, s := range reasons {
		if s == r {
			return i
		}
	}
	return nReasons - 1 // a reason added to core later counts as "other"
}

// Observer is a core.Observer that keeps Prometheus metrics of the events
// it sees, and a prometheus.Collector of those metrics: register it once
// on a Registerer (New does not) and give it to one or more Lockers with
// core.WithObserver. It is safe for concurrent use.
type Observer struct {
	acquireDuration *prometheus.HistogramVec
	operations      *prometheus.CounterVec
	locksHeld       *prometheus.GaugeVec
	nodeErrors      *prometheus.CounterVec

	// Series cached on first use, so that an event looks nothing up.
	durations [nLocks][nReasons]atomic.Pointer[prometheus.Observer]
	counts    [nLocks][nOps][nReasons]atomic.Pointer[prometheus.Counter]
	held      [nLocks]atomic.Pointer[prometheus.Gauge]
}

var (
	_ core.Observer        = (*Observer)(nil)
	_ prometheus.Collector = (*Observer)(nil)
)

// New returns an Observer configured by opts. It registers nothing: pass
// it to a Registerer's Register (which reports a namespace or label name
// that Prometheus refuses) or MustRegister. Buckets that are not strictly
// increasing are refused with an error matching core.ErrInvalidArgument.
// New skips a nil Option.
func New(opts ...Option) (*Observer, error) {
	o := options{namespace: DefaultNamespace, buckets: DefaultBuckets()}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	for i := 1; i < len(o.buckets); i++ {
		if !(o.buckets[i] > o.buckets[i-1]) {
			return nil, fmt.Errorf("%w: metrics: buckets must be strictly increasing, got %v", core.ErrInvalidArgument, o.buckets)
		}
	}
	durationOpts := prometheus.HistogramOpts{
		Namespace:   o.namespace,
		Name:        "acquire_duration_seconds",
		Help:        "Duration of lock acquisitions (calls of Acquire, TryAcquire and their multi-key and shared forms, retries included), by outcome and kind of lock.",
		ConstLabels: o.constLabels,
		Buckets:     o.buckets,
	}
	m := &Observer{
		acquireDuration: prometheus.NewHistogramVec(durationOpts, []string{"outcome", "lock"}),
		operations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace:   o.namespace,
			Name:        "operations_total",
			Help:        "Lock operations (acquire, extend, release) and losses (lost), by outcome and kind of lock.",
			ConstLabels: o.constLabels,
		}, []string{"op", "outcome", "lock"}),
		locksHeld: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace:   o.namespace,
			Name:        "locks_held",
			Help:        "Locks acquired and not yet released (a lost lock counts until it is released), by kind of lock.",
			ConstLabels: o.constLabels,
		}, []string{"lock"}),
		nodeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace:   o.namespace,
			Name:        "node_errors_total",
			Help:        "Node calls that failed or timed out, by node and operation.",
			ConstLabels: o.constLabels,
		}, []string{"node", "op"}),
	}
	m.gauge(0) // the mutexes' gauge is there, at 0, from the start
	return m, nil
}

// Describe sends the descriptors of the Observer's metrics, for
// prometheus.Collector.
func (m *Observer) Describe(ch chan<- *prometheus.Desc) {
	m.acquireDuration.Describe(ch)
	m.operations.Describe(ch)
	m.locksHeld.Describe(ch)
	m.nodeErrors.Describe(ch)
}

// Collect sends the Observer's metrics, for prometheus.Collector.
func (m *Observer) Collect(ch chan<- prometheus.Metric) {
	m.acquireDuration.Collect(ch)
	m.operations.Collect(ch)
	m.locksHeld.Collect(ch)
	m.nodeErrors.Collect(ch)
}

// Observe updates the metrics with e, for core.Observer. Events of a kind
// it does not know are ignored.
func (m *Observer) Observe(_ context.Context, e core.Event) {
	op := opIndex(e.Kind)
	if op < 0 {
		return
	}
	lock, r := lockIndex(e.Lock), reasonIndex(e.Err)
	m.counter(lock, op, r).Inc()
	switch e.Kind {
	case core.OpAcquire:
		m.duration(lock, r).Observe(e.Duration.Seconds())
		if e.Err == nil {
			m.gauge(lock).Inc()
		}
	case core.OpRelease:
		m.gauge(lock).Dec()
	}
	for i := range e.Nodes {
		if n := &e.Nodes[i]; n.Outcome == core.OutcomeFailed {
			m.nodeErrors.WithLabelValues(n.Node, e.Kind.String()).Inc()
		}
	}
}

func (m *Observer) counter(lock, op, r int) prometheus.Counter {
	if c := m.counts[lock][op][r].Load(); c != nil {
		return *c
	}
	c := m.operations.WithLabelValues(ops[op].String(), reasons[r], locks[lock])
	m.counts[lock][op][r].Store(&c)
	return c
}

func (m *Observer) duration(lock, r int) prometheus.Observer {
	if h := m.durations[lock][r].Load(); h != nil {
		return *h
	}
	h := m.acquireDuration.WithLabelValues(reasons[r], locks[lock])
	m.durations[lock][r].Store(&h)
	return h
}

func (m *Observer) gauge(lock int) prometheus.Gauge {
	if g := m.held[lock].Load(); g != nil {
		return *g
	}
	g := m.locksHeld.WithLabelValues(locks[lock])
	m.held[lock].Store(&g)
	return g
}
