package safety_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/quorumlock/quorumlock/conformance/safety"
)

// permit is o as the operation of a permit of a semaphore of two.
func permit(o safety.LockOp) safety.LockOp { o.Permits = 2; return o }

// TestSemaphoreModel: two permit holders at once pass, a third fails,
// and one granted after a holder's end passes.
func TestSemaphoreModel(t *testing.T) {
	for _, c := range []struct {
		name string
		ops  []safety.LockOp
		ok   bool
	}{
		{"two together", []safety.LockOp{permit(lop(0, acq, 0, 10, ok, 100)), permit(lop(1, acq, 5, 15, ok, 105)),
			permit(lop(0, rel, 20, 25, ok, 0)), permit(lop(1, rel, 30, 35, ok, 0))}, true},
		{"three together", []safety.LockOp{permit(lop(0, acq, 0, 10, ok, 100)), permit(lop(1, acq, 5, 15, ok, 105)),
			permit(lop(2, acq, 16, 18, ok, 110)), permit(lop(0, rel, 20, 25, ok, 0)), permit(lop(1, rel, 30, 35, ok, 0)),
			permit(lop(2, rel, 40, 45, ok, 0))}, false},
		{"a third after one's release", []safety.LockOp{permit(lop(0, acq, 0, 10, ok, 100)), permit(lop(1, acq, 5, 15, ok, 105)),
			permit(lop(0, rel, 20, 25, ok, 0)), permit(lop(2, acq, 26, 28, ok, 120)), permit(lop(1, rel, 30, 35, ok, 0)),
			permit(lop(2, rel, 40, 45, ok, 0))}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			assertLockHistory(t, c.ops, c.ok, "k")
		})
	}
}

// TestTooManyHolders: a permit section whose entry counted more holders
// than permits is a violation; one that counted K is not.
func TestTooManyHolders(t *testing.T) {
	s := safety.Section{Client: 0, Key: "k", Permits: 2, Count: 2, Start: 1, End: 2, ValidUntil: 10}
	assert.Empty(t, safety.Check([]safety.Section{s}, false))
	s.Count = 3
	v := safety.Check([]safety.Section{s}, false)
	if assert.Len(t, v, 1) {
		assert.Equal(t, safety.TooMany, v[0].Kind)
	}
}
