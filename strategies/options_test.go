package strategies_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/quorumlock/quorumlock/internal/optiontest"
	"github.com/quorumlock/quorumlock/strategies"
)

// Every With function returns an Option that shows itself as written, and
// the strategies skip a nil Option.
func TestOptionsShowAsWritten(t *testing.T) {
	optiontest.Check(t, ".", map[string]fmt.Stringer{
		"WithStopAtQuorum": strategies.WithStopAtQuorum(true),
	})
	assert.Equal(t, "parallel(stop-at-quorum)", strategies.Parallel(nil, strategies.WithStopAtQuorum(true), nil).String())
	assert.Equal(t, "sequential", strategies.Sequential(nil).String())
	assert.Equal(t, "failfast", strategies.FailFast(nil).String())
}
