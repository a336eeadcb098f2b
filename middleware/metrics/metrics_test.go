package metrics_test

import (
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/middleware/metrics"
)

// namedNodes returns memory nodes named a, b, c, ... so that the node
// label is known.
func namedNodes(n int) []*memory.Node {
	nodes := make([]*memory.Node, n)
	for i := range nodes {
		nodes[i] = memory.New(memory.WithName(string(rune('a' + i))))
	}
	return nodes
}

// newLocker returns a Locker over nodes, closed at the end of the test.
func newLocker(t *testing.T, nodes []*memory.Node, opts ...core.Option) *core.Locker {
	t.Helper()
	l, err := core.New(memory.AsNodes(nodes), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	return l
}

// newObserver returns an Observer registered on a new pedantic registry.
func newObserver(t *testing.T, opts ...metrics.Option) (*metrics.Observer, *prometheus.Registry) {
	t.Helper()
	obs, err := metrics.New(opts...)
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(obs))
	return obs, reg
}

// find returns the metric of family name whose labels include want, or nil.
func find(t *testing.T, g prometheus.Gatherer, name string, want map[string]string) *dto.Metric {
	t.Helper()
	families, err := g.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			for k, v := range want {
				if !hasLabel(m, k, v) {
					continue metric
				}
			}
			return m
		}
	}
	return nil
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue() == value
		}
	}
	return false
}

func heldGauge(t *testing.T, g prometheus.Gatherer) float64 {
	t.Helper()
	m := find(t, g, "quorumlock_locks_held", nil)
	require.NotNil(t, m)
	return m.GetGauge().GetValue()
}

func TestObserver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs, reg := newObserver(t)
		nodes := namedNodes(3)
		l := newLocker(t, nodes, core.WithObserver(obs))
		ctx := t.Context()

		// An acquisition that takes 4 ms: node a answers 2 ms late, twice
		// at its first yes (its identity is asked too).
		nodes[0].SetLatency(2 * time.Millisecond)
		job, err := l.Acquire(ctx, "job")
		require.NoError(t, err)
		nodes[0].SetLatency(0)
		assert.Equal(t, 1.0, heldGauge(t, reg))

		// A contended TryAcquire.
		_, err = l.TryAcquire(ctx, "job")
		require.ErrorIs(t, err, core.ErrNotAcquired)

		// An extension.
		require.NoError(t, job.Extend(ctx))

		// A lock lost: its key vanishes, and the next extension finds out.
		batch, err := l.Acquire(ctx, "batch")
		require.NoError(t, err)
		assert.Equal(t, 2.0, heldGauge(t, reg))
		for _, n := range nodes {
			n.Del("batch")
		}
		require.ErrorIs(t, batch.Extend(ctx), core.ErrLockLost)
		assert.Equal(t, 2.0, heldGauge(t, reg), "a lost lock is still to be released")
		require.ErrorIs(t, batch.Release(ctx), core.ErrNotHeld)
		assert.Equal(t, 1.0, heldGauge(t, reg))

		// A node failure, in an acquisition and in two releases.
		nodes[2].Stop()
		report, err := l.Acquire(ctx, "report")
		require.NoError(t, err)
		require.NoError(t, report.Release(ctx))
		require.NoError(t, job.Release(ctx))
		require.NoError(t, job.Release(ctx), "a second release is not reported")

		const want = `
# HELP quorumlock_locks_held Locks acquired and not yet released (a lost lock counts until it is released), by kind of lock.
# TYPE quorumlock_locks_held gauge
quorumlock_locks_held{lock="mutex"} 0
# HELP quorumlock_node_errors_total Node calls that failed or timed out, by node and operation.
# TYPE quorumlock_node_errors_total counter
quorumlock_node_errors_total{node="c",op="acquire"} 1
quorumlock_node_errors_total{node="c",op="release"} 2
# HELP quorumlock_operations_total Lock operations (acquire, extend, release) and losses (lost), by outcome and kind of lock.
# TYPE quorumlock_operations_total counter
quorumlock_operations_total{lock="mutex",op="acquire",outcome="contended"} 1
quorumlock_operations_total{lock="mutex",op="acquire",outcome="ok"} 3
quorumlock_operations_total{lock="mutex",op="extend",outcome="lost"} 1
quorumlock_operations_total{lock="mutex",op="extend",outcome="ok"} 1
quorumlock_operations_total{lock="mutex",op="lost",outcome="lost"} 1
quorumlock_operations_total{lock="mutex",op="release",outcome="not_held"} 1
quorumlock_operations_total{lock="mutex",op="release",outcome="ok"} 2
`
		assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want),
			"quorumlock_locks_held", "quorumlock_node_errors_total", "quorumlock_operations_total"))

		ok := find(t, reg, "quorumlock_acquire_duration_seconds", map[string]string{"outcome": "ok"})
		require.NotNil(t, ok)
		h := ok.GetHistogram()
		assert.Equal(t, uint64(3), h.GetSampleCount())
		assert.InDelta(t, 0.004, h.GetSampleSum(), 1e-12, "only the first acquisition took time")
		buckets := map[float64]uint64{}
		for _, b := range h.GetBucket() {
			buckets[b.GetUpperBound()] = b.GetCumulativeCount()
		}
		assert.Equal(t, uint64(2), buckets[0.0025])
		assert.Equal(t, uint64(3), buckets[0.005])
		contended := find(t, reg, "quorumlock_acquire_duration_seconds", map[string]string{"outcome": "contended"})
		require.NotNil(t, contended)
		assert.Equal(t, uint64(1), contended.GetHistogram().GetSampleCount())
		assert.Equal(t, 2, testutil.CollectAndCount(obs, "quorumlock_acquire_duration_seconds"), "series: ok and contended")
	})
}

func TestObserverLint(t *testing.T) {
	obs, _ := newObserver(t)
	l := newLocker(t, namedNodes(1), core.WithObserver(obs))
	lock, err := l.Acquire(t.Context(), "k")
	require.NoError(t, err)
	require.NoError(t, lock.Release(t.Context()))
	problems, err := testutil.CollectAndLint(obs)
	require.NoError(t, err)
	assert.Empty(t, problems)
}

func TestObserverUnknownKind(t *testing.T) {
	obs, reg := newObserver(t)
	obs.Observe(t.Context(), core.Event{Kind: "unknown"})
	assert.Equal(t, 0, testutil.CollectAndCount(obs, "quorumlock_operations_total"))
	assert.Equal(t, 0.0, heldGauge(t, reg))
}

func TestObserverConcurrent(t *testing.T) {
	obs, reg := newObserver(t)
	// A generous node timeout: the round's deadline starts before its
	// attempt goroutines do, and a loaded machine running with -race can
	// delay them past the default 50 ms, which leaves nodes not tried.
	l := newLocker(t, namedNodes(3), core.WithObserver(obs), core.WithNodeTimeout(5*time.Second))
	const workers, rounds = 8, 20
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			key := "worker-" + string(rune('a'+w))
			for range rounds {
				lock, err := l.Acquire(t.Context(), key)
				if !assert.NoError(t, err) {
					return
				}
				assert.NoError(t, lock.Release(t.Context()))
			}
		})
	}
	wg.Wait()
	acquired := find(t, reg, "quorumlock_operations_total", map[string]string{"op": "acquire", "outcome": "ok"})
	require.NotNil(t, acquired)
	assert.Equal(t, float64(workers*rounds), acquired.GetCounter().GetValue())
	assert.Equal(t, 0.0, heldGauge(t, reg))
}

func TestOptions(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		obs, reg := newObserver(t)
		obs.Observe(t.Context(), core.Event{Kind: core.OpAcquire})
		m := find(t, reg, "quorumlock_acquire_duration_seconds", nil)
		require.NotNil(t, m)
		var bounds []float64
		for _, b := range m.GetHistogram().GetBucket() {
			bounds = append(bounds, b.GetUpperBound())
		}
		assert.Equal(t, metrics.DefaultBuckets(), bounds)
		assert.Equal(t, 0.0005, bounds[0])
		assert.Equal(t, 10.0, bounds[len(bounds)-1])
	})
	t.Run("namespace, const labels, buckets", func(t *testing.T) {
		labels := prometheus.Labels{"locker": "orders"}
		obs, reg := newObserver(t, metrics.WithNamespace("app"), metrics.WithConstLabels(labels), metrics.WithBuckets(0.1, 1), nil)
		labels["locker"] = "changed" // the option keeps a copy
		obs.Observe(t.Context(), core.Event{Kind: core.OpAcquire, Duration: 500 * time.Millisecond})
		obs.Observe(t.Context(), core.Event{Kind: core.OpRelease, Nodes: []core.NodeResult{{Node: "n1", Outcome: core.OutcomeFailed}, {Node: "n2", Outcome: core.OutcomeRefused}}})

		const want = `
# HELP app_acquire_duration_seconds Duration of lock acquisitions (calls of Acquire, TryAcquire and their multi-key and shared forms, retries included), by outcome and kind of lock.
# TYPE app_acquire_duration_seconds histogram
app_acquire_duration_seconds_bucket{lock="mutex",locker="orders",outcome="ok",le="0.1"} 0
app_acquire_duration_seconds_bucket{lock="mutex",locker="orders",outcome="ok",le="1"} 1
app_acquire_duration_seconds_bucket{lock="mutex",locker="orders",outcome="ok",le="+Inf"} 1
app_acquire_duration_seconds_sum{lock="mutex",locker="orders",outcome="ok"} 0.5
app_acquire_duration_seconds_count{lock="mutex",locker="orders",outcome="ok"} 1
# HELP app_locks_held Locks acquired and not yet released (a lost lock counts until it is released), by kind of lock.
# TYPE app_locks_held gauge
app_locks_held{lock="mutex",locker="orders"} 0
# HELP app_node_errors_total Node calls that failed or timed out, by node and operation.
# TYPE app_node_errors_total counter
app_node_errors_total{locker="orders",node="n1",op="release"} 1
# HELP app_operations_total Lock operations (acquire, extend, release) and losses (lost), by outcome and kind of lock.
# TYPE app_operations_total counter
app_operations_total{lock="mutex",locker="orders",op="acquire",outcome="ok"} 1
app_operations_total{lock="mutex",locker="orders",op="release",outcome="ok"} 1
`
		assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want)))
	})
	t.Run("no namespace", func(t *testing.T) {
		_, reg := newObserver(t, metrics.WithNamespace(""))
		assert.NotNil(t, find(t, reg, "locks_held", nil))
	})
	t.Run("bad buckets are refused", func(t *testing.T) {
		for _, b := range [][]float64{{1, 0.5}, {1, 1}, {0.1, 2, 2}} {
			_, err := metrics.New(metrics.WithBuckets(b...))
			assert.ErrorIs(t, err, core.ErrInvalidArgument, "%v", b)
		}
	})
	t.Run("nil or empty keeps what was set", func(t *testing.T) {
		obs, reg := newObserver(t, metrics.WithConstLabels(prometheus.Labels{"locker": "orders"}), metrics.WithBuckets(0.1, 1),
			metrics.WithConstLabels(nil), metrics.WithConstLabels(prometheus.Labels{}), metrics.WithBuckets(), metrics.WithBuckets([]float64{}...))
		obs.Observe(t.Context(), core.Event{Kind: core.OpAcquire, Duration: 500 * time.Millisecond})
		m := find(t, reg, "quorumlock_acquire_duration_seconds", map[string]string{"locker": "orders", "outcome": "ok"})
		require.NotNil(t, m)
		assert.Len(t, m.GetHistogram().GetBucket(), 2)
	})
	t.Run("a bad name is refused by Register", func(t *testing.T) {
		obs, err := metrics.New(metrics.WithConstLabels(prometheus.Labels{"__reserved": "x"}))
		require.NoError(t, err)
		err = prometheus.NewRegistry().Register(obs)
		assert.ErrorContains(t, err, "__reserved")
	})
	t.Run("String", func(t *testing.T) {
		assert.Equal(t, `WithNamespace("app")`, metrics.WithNamespace("app").String())
		assert.Equal(t, `WithBuckets(0.1, 1)`, metrics.WithBuckets(0.1, 1).String())
		assert.Equal(t, `WithBuckets()`, metrics.WithBuckets().String())
		assert.Equal(t, `WithConstLabels(prometheus.Labels{"a": "b", "c": "d"})`, metrics.WithConstLabels(prometheus.Labels{"c": "d", "a": "b"}).String())
		assert.Equal(t, `WithConstLabels(nil)`, metrics.WithConstLabels(nil).String())
	})
}

func TestObserveAllocates(t *testing.T) {
	obs, err := metrics.New()
	require.NoError(t, err)
	e := core.Event{Kind: core.OpAcquire, Lock: "shared", Duration: time.Millisecond, Nodes: []core.NodeResult{{Node: "a", Outcome: core.OutcomeOK}}}
	obs.Observe(t.Context(), e) // makes the series
	assert.Zero(t, testing.AllocsPerRun(100, func() { obs.Observe(t.Context(), e) }))
}

// The lock label tells the kinds of lock apart: each has its own counts,
// durations and gauge of locks held.
func TestObserverLockKinds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs, reg := newObserver(t)
		l := newLocker(t, namedNodes(3), core.WithObserver(obs))
		ctx := t.Context()
		multi, err := l.AcquireAll(ctx, "a", "b")
		require.NoError(t, err)
		r1, err := l.AcquireShared(ctx, "s")
		require.NoError(t, err)
		r2, err := l.AcquireShared(ctx, "s")
		require.NoError(t, err)
		_, err = l.TryAcquire(ctx, "s")
		require.ErrorIs(t, err, core.ErrNotAcquired, "a writer waits for the readers")
		require.NoError(t, r1.Extend(ctx))

		const held = `
# HELP quorumlock_locks_held Locks acquired and not yet released (a lost lock counts until it is released), by kind of lock.
# TYPE quorumlock_locks_held gauge
quorumlock_locks_held{lock="multi"} 1
quorumlock_locks_held{lock="mutex"} 0
quorumlock_locks_held{lock="shared"} 2
`
		assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(held), "quorumlock_locks_held"))
		for _, lock := range []*core.Lock{multi, r1, r2} {
			require.NoError(t, lock.Release(ctx))
		}
		// Events from elsewhere: without a kind (a mutex), a permit and a
		// leader's lock, and of a kind this package does not know (other).
		obs.Observe(ctx, core.Event{Kind: core.OpAcquire})
		obs.Observe(ctx, core.Event{Kind: core.OpAcquire, Lock: "semaphore"})
		obs.Observe(ctx, core.Event{Kind: core.OpAcquire, Lock: "leader"})
		obs.Observe(ctx, core.Event{Kind: core.OpAcquire, Lock: "bogus"})

		const want = `
# HELP quorumlock_locks_held Locks acquired and not yet released (a lost lock counts until it is released), by kind of lock.
# TYPE quorumlock_locks_held gauge
quorumlock_locks_held{lock="leader"} 1
quorumlock_locks_held{lock="multi"} 0
quorumlock_locks_held{lock="mutex"} 1
quorumlock_locks_held{lock="other"} 1
quorumlock_locks_held{lock="semaphore"} 1
quorumlock_locks_held{lock="shared"} 0
# HELP quorumlock_operations_total Lock operations (acquire, extend, release) and losses (lost), by outcome and kind of lock.
# TYPE quorumlock_operations_total counter
quorumlock_operations_total{lock="leader",op="acquire",outcome="ok"} 1
quorumlock_operations_total{lock="multi",op="acquire",outcome="ok"} 1
quorumlock_operations_total{lock="multi",op="release",outcome="ok"} 1
quorumlock_operations_total{lock="mutex",op="acquire",outcome="contended"} 1
quorumlock_operations_total{lock="mutex",op="acquire",outcome="ok"} 1
quorumlock_operations_total{lock="other",op="acquire",outcome="ok"} 1
quorumlock_operations_total{lock="semaphore",op="acquire",outcome="ok"} 1
quorumlock_operations_total{lock="shared",op="acquire",outcome="ok"} 2
quorumlock_operations_total{lock="shared",op="extend",outcome="ok"} 1
quorumlock_operations_total{lock="shared",op="release",outcome="ok"} 2
`
		assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "quorumlock_locks_held", "quorumlock_operations_total"))
		for _, kind := range []string{"mutex", "multi", "shared", "semaphore", "leader", "other"} {
			assert.NotNil(t, find(t, reg, "quorumlock_acquire_duration_seconds", map[string]string{"lock": kind, "outcome": "ok"}), kind)
		}
	})
}
