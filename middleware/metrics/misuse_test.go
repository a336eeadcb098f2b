package metrics_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/middleware/metrics"
)

// The subtests of TestMisuseMetrics are rows of the table "Bad input and
// the errors it gets" of docs/errors.md (TestReadmeBadInputTable, in core,
// checks that each one named there exists).

func TestMisuseMetrics(t *testing.T) {
	refused := func(t *testing.T, msg string, opts ...metrics.Option) {
		t.Helper()
		obs, err := metrics.New(opts...)
		assert.Nil(t, obs)
		require.ErrorIs(t, err, core.ErrInvalidArgument)
		require.ErrorContains(t, err, msg)
	}
	t.Run("no_buckets", func(t *testing.T) {
		// Nil means unset: no bucket keeps the default ones.
		obs, err := metrics.New(metrics.WithBuckets(), nil)
		require.NoError(t, err)
		reg := prometheus.NewRegistry()
		require.NoError(t, reg.Register(obs))
		obs.Observe(t.Context(), core.Event{Kind: core.OpAcquire})
		families, err := reg.Gather()
		require.NoError(t, err)
		i := slices.IndexFunc(families, func(f *dto.MetricFamily) bool { return f.GetName() == "quorumlock_acquire_duration_seconds" })
		require.GreaterOrEqual(t, i, 0)
		assert.Len(t, families[i].GetMetric()[0].GetHistogram().GetBucket(), len(metrics.DefaultBuckets()))
	})
	t.Run("buckets_not_increasing", func(t *testing.T) {
		refused(t, "quorumlock: invalid argument: metrics: buckets must be strictly increasing, got [1 0.5]", metrics.WithBuckets(1, 0.5))
		refused(t, "quorumlock: invalid argument: metrics: buckets must be strictly increasing, got [1 1]", metrics.WithBuckets(1, 1))
	})
	t.Run("registered_twice", func(t *testing.T) {
		// Two Lockers, an Observer each, one registry: give them one
		// Observer, or tell them apart with a const label.
		reg := prometheus.NewRegistry()
		a, err := metrics.New()
		require.NoError(t, err)
		b, err := metrics.New()
		require.NoError(t, err)
		require.NoError(t, reg.Register(a))
		err = reg.Register(b)
		require.ErrorContains(t, err, "duplicate metrics collector registration attempted")
		var are prometheus.AlreadyRegisteredError
		require.True(t, errors.As(err, &are))

		// Each with its own value of one const label, they register.
		reg = prometheus.NewRegistry()
		for _, name := range []string{"orders", "billing"} {
			obs, err := metrics.New(metrics.WithConstLabels(prometheus.Labels{"locker": name}))
			require.NoError(t, err)
			require.NoError(t, reg.Register(obs))
		}
	})
	t.Run("const_label_clash", func(t *testing.T) {
		for _, label := range []string{"outcome", "op", "lock", "node"} {
			obs, err := metrics.New(metrics.WithConstLabels(prometheus.Labels{label: "x"}))
			require.NoError(t, err, "New registers nothing, so it cannot tell")
			err = prometheus.NewRegistry().Register(obs)
			require.ErrorContains(t, err, `descriptor Desc{fqName: "quorumlock_`, label)
			require.ErrorContains(t, err, `is invalid: duplicate label names in constant and variable labels for metric "quorumlock_`, label)
		}
	})
}
