package safety_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/conformance/safety"
)

// TestEnvelopeShowsWhereSafetyEnds runs a small sweep whose predictions
// leave wide margins under load: node 0's clock at x1.5, where a key of
// PX 500 ms expires there 160 ms before the holder's validity ends, and a
// pause of 750 ms, past the TTL. Trials start 50 ms apart, so that one
// stall of the loaded machine does not spoil every trial of a cell. Without fencing the register sees a stale
// write in those cells; with fencing, in none, and it refuses the stale
// holder's writes. (Cells near the limit, x1.01 or x1.02, are for make
// chaos: their margins are a few milliseconds.)
func TestEnvelopeShowsWhereSafetyEnds(t *testing.T) {
	requireFaketime(t)
	env, err := safety.RunEnvelope(t.Context(), safety.EnvelopeConfig{
		Rates: []float64{1, 1.5}, Pauses: []time.Duration{0, 750 * time.Millisecond},
		TTL: 500 * time.Millisecond, Trials: 3, Stagger: 50 * time.Millisecond, NewNode: newNode, Logf: t.Logf,
	})
	require.NoError(t, err)
	t.Log("\n" + env.Table())
	assert.Equal(t, 7*time.Millisecond, env.Drift, "core's drift allowance: TTL x 1% + 2 ms")
	require.Len(t, env.Rows, 2)
	for _, r := range env.Rows { // (how early: TestFastServerExpiresEarly)
		assert.GreaterOrEqual(t, r.Expiry, time.Duration(float64(500*time.Millisecond)/r.Rate)-time.Millisecond,
			"x%v: a key lives no less than the fast clock allows", r.Rate)
	}
	for _, r := range env.Rows {
		for _, c := range r.Cells {
			assert.Positive(t, c.Trials, "x%v %v: trials ran (%s)", r.Rate, c, c.SkipReason)
			switch {
			case c.Fenced:
				assert.Zero(t, c.Violations, "x%v %v: fencing refuses the stale holder", r.Rate, c)
				if c.Pause > 0 || r.Rate > 1 {
					assert.Positive(t, c.Refused, "x%v %v: the stale holder wrote, and was refused", r.Rate, c)
				}
			case c.Predicted:
				assert.Positive(t, c.Violations, "x%v %v: the sweep shows the predicted violation", r.Rate, c)
			}
		}
	}
	assert.True(t, env.Rows[1].Cells[0].Predicted && !env.Rows[0].Cells[0].Predicted,
		"theory: a clock at x1.5 breaks the lock without a pause, one at x1 does not")
}

// Surprises fails a cell where no trial ran, and a violation theory does
// not predict, except within a few milliseconds of the drift allowance's
// limit, where a descheduled holder crosses it.
func TestEnvelopeSurprises(t *testing.T) {
	env := &safety.Envelope{TTL: 2 * time.Second, Drift: 22 * time.Millisecond, Rows: []safety.EnvelopeRow{
		{Rate: 1, Cells: []safety.Cell{{Trials: 10, Violations: 1}, {Trials: 0, Fenced: true}}},
		{Rate: 1.01, Cells: []safety.Cell{{Trials: 10, Violations: 1}, {Trials: 10, Violations: 1, Fenced: true}}},
		{Rate: 1.05, Cells: []safety.Cell{{Trials: 10, Predicted: true}}},
	}}
	unpredicted, missed := env.Surprises()
	assert.Len(t, unpredicted, 3, "x1's violation, x1's empty cell, x1.01's fenced violation: %q", unpredicted)
	assert.Contains(t, unpredicted[1], "no trial ran")
	assert.Len(t, missed, 1, "x1.05's predicted violation not seen")
}
