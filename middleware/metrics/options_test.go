package metrics_test

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/optiontest"
	"github.com/quorumlock/quorumlock/middleware/metrics"
)

// Every With function returns an Option that shows itself as written, and
// New skips a nil Option.
func TestOptionsShowAsWritten(t *testing.T) {
	optiontest.Check(t, ".", map[string]fmt.Stringer{
		"WithNamespace":   metrics.WithNamespace("app"),
		"WithConstLabels": metrics.WithConstLabels(prometheus.Labels{"locker": "orders"}),
		"WithBuckets":     metrics.WithBuckets(0.1, 1),
	})
	obs, err := metrics.New(nil, metrics.WithNamespace("app"), nil)
	require.NoError(t, err)
	require.NotNil(t, obs)
}
