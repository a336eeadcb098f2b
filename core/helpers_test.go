package core_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/strategies"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// allStrategies are every built-in strategy in every mode.
func allStrategies() []strategies.Strategy {
	return []strategies.Strategy{
		strategies.Sequential(),
		strategies.Sequential(strategies.WithStopAtQuorum(true)),
		strategies.Parallel(),
		strategies.Parallel(strategies.WithStopAtQuorum(true)),
		strategies.FailFast(),
		strategies.FailFast(strategies.WithStopAtQuorum(true)),
	}
}

// newLocker returns a Locker over n fresh memory nodes, closed at the end
// of the test.
func newLocker(t *testing.T, n int, opts ...core.Option) (*core.Locker, []*memory.Node) {
	t.Helper()
	nodes := memory.NewNodes(n)
	l, err := core.New(memory.AsNodes(nodes), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	return l, nodes
}

// keysOn returns the live keys of every node.
func keysOn(nodes []*memory.Node) [][]string {
	out := make([][]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Keys()
	}
	return out
}

func emptyEverywhere(n int) [][]string {
	out := make([][]string, n)
	for i := range out {
		out[i] = []string{}
	}
	return out
}

// quorumError extracts the *QuorumError from err.
func quorumError(t *testing.T, err error) *core.QuorumError {
	t.Helper()
	var qe *core.QuorumError
	require.True(t, errors.As(err, &qe), "not a *QuorumError: %v", err)
	return qe
}

func outcomes(qe *core.QuorumError) []core.Outcome { return outcomesOf(qe.Nodes) }

func outcomesOf(nodes []core.NodeResult) []core.Outcome {
	out := make([]core.Outcome, len(nodes))
	for i, n := range nodes {
		out[i] = n.Outcome
	}
	return out
}

// drift is the Redlock drift allowance for ttl at the default factor.
func drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*core.DefaultDriftFactor) + 2*time.Millisecond
}
