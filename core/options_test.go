package core_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/internal/optiontest"
	"github.com/quorumlock/quorumlock/strategies"
)

// Every With function returns an Option that shows itself as written, and
// New skips a nil Option.
func TestOptionsShowAsWritten(t *testing.T) {
	optiontest.Check(t, ".", map[string]fmt.Stringer{
		"WithAtRiskMargin":  core.WithAtRiskMargin(time.Second),
		"WithDriftFactor":   core.WithDriftFactor(0.05),
		"WithFencing":       core.WithFencing(true),
		"WithKeepAlive":     core.WithKeepAlive(time.Second),
		"WithKeyPrefix":     core.WithKeyPrefix("app:"),
		"WithMaxHold":       core.WithMaxHold(time.Minute),
		"WithNodeTimeout":   core.WithNodeTimeout(time.Millisecond),
		"WithObserver":      core.WithObserver(observerFunc(func(context.Context, core.Event) {})),
		"WithQuorum":        core.WithQuorum(3),
		"WithRestartGuard":  core.WithRestartGuard(time.Minute),
		"WithRetryDelay":    core.WithRetryDelay(strategies.JitterDelay(time.Millisecond, 2*time.Millisecond)),
		"WithStrategy":      core.WithStrategy(strategies.FailFast()),
		"WithTTL":           core.WithTTL(time.Second),
		"WithTries":         core.WithTries(2),
		"WithWakeOnRelease": core.WithWakeOnRelease(false),
	})
	l, _ := newLocker(t, 3, nil, core.WithTTL(time.Second), nil)
	assert.Equal(t, time.Second, l.TTL())
}
