package safety_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/conformance/safety"
)

// lop is a lock operation on key "k", times in milliseconds.
func lop(client int, kind safety.LockOpKind, call, ret int, o safety.Outcome, valid int) safety.LockOp {
	ms := time.Millisecond
	return safety.LockOp{Client: client, Key: "k", Kind: kind, Call: time.Duration(call) * ms, Return: time.Duration(ret) * ms,
		Outcome: o, ValidUntil: time.Duration(valid) * ms}
}

// rop is a read-modify-write of key "k"'s register, times in milliseconds.
func rop(client, call, ret int, read, wrote int64, o safety.Outcome) safety.RegisterOp {
	ms := time.Millisecond
	return safety.RegisterOp{Client: client, Key: "k", Call: time.Duration(call) * ms, Return: time.Duration(ret) * ms,
		Read: read, Wrote: wrote, Outcome: o}
}

// shared is o as a shared lock's operation.
func shared(o safety.LockOp) safety.LockOp { o.Shared = true; return o }

// on is o on the lock of keys (a multi-key lock when more than one).
func on(o safety.LockOp, keys ...string) safety.LockOp {
	o.Key, o.Keys = strings.Join(keys, ","), keys
	return o
}

// reads is a reader's section on key "k"'s register, times in
// milliseconds: it read first, then again.
func reads(client, call, ret int, first, again int64) safety.RegisterOp {
	o := rop(client, call, ret, first, 0, ok)
	o.Reader, o.Again = true, again
	return o
}

const (
	acq = safety.Acquire
	ext = safety.Extend
	rel = safety.Release
	ok  = safety.OK
)

func TestMutexModel(t *testing.T) {
	for _, c := range []struct {
		name string
		ops  []safety.LockOp
		ok   bool
	}{
		{"one after the other", []safety.LockOp{lop(0, acq, 0, 10, ok, 100), lop(0, rel, 20, 25, ok, 0),
			lop(1, acq, 22, 30, ok, 120), lop(1, rel, 40, 45, ok, 0)}, true},
		{"granted while held", []safety.LockOp{lop(0, acq, 0, 10, ok, 100), lop(1, acq, 12, 18, ok, 110),
			lop(0, rel, 20, 25, ok, 0), lop(1, rel, 40, 45, ok, 0)}, false},
		{"granted to both at once", []safety.LockOp{lop(0, acq, 0, 10, ok, 100), lop(1, acq, 5, 15, ok, 110),
			lop(0, rel, 20, 25, ok, 0), lop(1, rel, 30, 35, ok, 0)}, false},
		{"granted after the holder's validity", []safety.LockOp{lop(0, acq, 0, 10, ok, 50), lop(1, acq, 55, 60, ok, 150),
			lop(0, rel, 200, 210, ok, 0), lop(1, rel, 220, 230, ok, 0)}, true},
		{"granted before the holder's validity, released late", []safety.LockOp{lop(0, acq, 0, 10, ok, 100), lop(1, acq, 55, 60, ok, 150),
			lop(0, rel, 200, 210, ok, 0), lop(1, rel, 220, 230, ok, 0)}, false},
		{"a failed release still ends the hold", []safety.LockOp{lop(0, acq, 0, 10, ok, 100), lop(0, rel, 20, 25, safety.Failed, 0),
			lop(1, acq, 30, 40, ok, 130), lop(1, rel, 50, 55, ok, 0)}, true},
		{"never released", []safety.LockOp{lop(0, acq, 0, 10, ok, 50), lop(1, acq, 60, 70, ok, 160), lop(1, rel, 80, 90, ok, 0)}, true},
		{"refusals and unknowns while held", []safety.LockOp{lop(0, acq, 0, 10, ok, 100), lop(1, acq, 5, 30, safety.Failed, 0),
			lop(2, acq, 8, 60, safety.Unknown, 0), lop(1, rel, 31, 32, ok, 0), lop(0, rel, 70, 75, ok, 0)}, true},
		{"extended past another's grant", []safety.LockOp{lop(0, acq, 0, 10, ok, 50), lop(0, ext, 40, 45, ok, 150),
			lop(1, acq, 100, 110, ok, 200), lop(0, rel, 160, 170, ok, 0), lop(1, rel, 180, 190, ok, 0)}, false},
		{"a failed extension", []safety.LockOp{lop(0, acq, 0, 10, ok, 50), lop(0, ext, 40, 45, safety.Failed, 0),
			lop(1, acq, 100, 110, ok, 200), lop(0, rel, 160, 170, ok, 0), lop(1, rel, 180, 190, ok, 0)}, true},
		{"extended by a client that does not hold it", []safety.LockOp{lop(0, acq, 0, 10, ok, 100), lop(0, rel, 20, 25, ok, 0),
			lop(1, ext, 30, 35, ok, 130)}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			assertLockHistory(t, c.ops, c.ok, "k")
		})
	}
}

func TestReadWriteModel(t *testing.T) {
	for _, c := range []struct {
		name string
		ops  []safety.LockOp
		ok   bool
	}{
		{"readers together", []safety.LockOp{shared(lop(0, acq, 0, 10, ok, 100)), shared(lop(1, acq, 5, 15, ok, 105)),
			shared(lop(0, rel, 20, 25, ok, 0)), shared(lop(1, rel, 30, 35, ok, 0))}, true},
		{"a writer after the readers", []safety.LockOp{shared(lop(0, acq, 0, 10, ok, 100)), shared(lop(1, acq, 5, 15, ok, 105)),
			shared(lop(0, rel, 20, 25, ok, 0)), shared(lop(1, rel, 30, 35, ok, 0)), lop(2, acq, 36, 40, ok, 140), lop(2, rel, 50, 55, ok, 0)}, true},
		{"a writer beside a reader", []safety.LockOp{shared(lop(0, acq, 0, 10, ok, 100)), lop(1, acq, 12, 18, ok, 110),
			shared(lop(0, rel, 20, 25, ok, 0)), lop(1, rel, 40, 45, ok, 0)}, false},
		{"a reader beside a writer", []safety.LockOp{lop(0, acq, 0, 10, ok, 100), shared(lop(1, acq, 12, 18, ok, 110)),
			lop(0, rel, 20, 25, ok, 0), shared(lop(1, rel, 40, 45, ok, 0))}, false},
		{"a writer after the reader's validity", []safety.LockOp{shared(lop(0, acq, 0, 10, ok, 50)), lop(1, acq, 55, 60, ok, 150),
			shared(lop(0, rel, 200, 210, ok, 0)), lop(1, rel, 220, 230, ok, 0)}, true},
		{"a reader extended past a writer's grant", []safety.LockOp{shared(lop(0, acq, 0, 10, ok, 50)), shared(lop(0, ext, 40, 45, ok, 150)),
			lop(1, acq, 100, 110, ok, 200), shared(lop(0, rel, 160, 170, ok, 0)), lop(1, rel, 180, 190, ok, 0)}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			assertLockHistory(t, c.ops, c.ok, "k")
		})
	}
}

func TestMultiKeyHistories(t *testing.T) {
	for _, c := range []struct {
		name string
		ops  []safety.LockOp
		bad  []string // the keys whose histories fail
	}{
		{"disjoint sets", []safety.LockOp{on(lop(0, acq, 0, 10, ok, 100), "a", "b"), on(lop(1, acq, 5, 15, ok, 105), "c"),
			on(lop(0, rel, 20, 25, ok, 0), "a", "b"), on(lop(1, rel, 30, 35, ok, 0), "c")}, nil},
		{"overlapping sets one after the other", []safety.LockOp{on(lop(0, acq, 0, 10, ok, 100), "a", "b"), on(lop(0, rel, 20, 25, ok, 0), "a", "b"),
			on(lop(1, acq, 22, 30, ok, 120), "b", "c"), on(lop(1, rel, 40, 45, ok, 0), "b", "c")}, nil},
		{"overlapping sets at once", []safety.LockOp{on(lop(0, acq, 0, 10, ok, 100), "a", "b"), on(lop(1, acq, 5, 15, ok, 105), "b", "c"),
			on(lop(0, rel, 20, 25, ok, 0), "a", "b"), on(lop(1, rel, 30, 35, ok, 0), "b", "c")}, []string{"b"}},
		{"a set beside a plain lock on one of its keys", []safety.LockOp{on(lop(0, acq, 0, 10, ok, 100), "a", "b"), on(lop(1, acq, 5, 15, ok, 105), "a"),
			on(lop(0, rel, 20, 25, ok, 0), "a", "b"), on(lop(1, rel, 30, 35, ok, 0), "a")}, []string{"a"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			assertLockHistory(t, c.ops, c.bad == nil, c.bad...)
		})
	}
}

// assertLockHistory checks ops with CheckHistories: no violation when ok,
// else a lock history violation for each of bad, visualised.
func assertLockHistory(t *testing.T, ops []safety.LockOp, ok bool, bad ...string) {
	t.Helper()
	h := safety.NewHistory()
	for _, o := range ops {
		h.AddLockOp(o)
	}
	vs, err := safety.CheckHistories(h, t.TempDir(), "model")
	require.NoError(t, err)
	if ok {
		assert.Empty(t, vs)
		return
	}
	require.Len(t, vs, len(bad))
	for i, v := range vs {
		assert.Equal(t, safety.LockHistory, v.Kind)
		assert.Equal(t, bad[i], v.Key)
		assertVisualised(t, v)
	}
}

func TestRegisterModel(t *testing.T) {
	for _, c := range []struct {
		name string
		ops  []safety.RegisterOp
		ok   bool
	}{
		{"one after the other", []safety.RegisterOp{rop(0, 0, 10, 0, 1, ok), rop(1, 20, 30, 1, 2, ok), rop(0, 40, 50, 2, 3, ok)}, true},
		{"a lost update", []safety.RegisterOp{rop(0, 0, 10, 0, 1, ok), rop(1, 5, 15, 0, 1, ok)}, false},
		{"a stale read", []safety.RegisterOp{rop(0, 0, 10, 0, 1, ok), rop(1, 20, 30, 0, 1, ok)}, false},
		{"an unknown write not applied", []safety.RegisterOp{rop(0, 0, 10, 0, 1, safety.Unknown), rop(1, 20, 30, 0, 1, ok), rop(2, 40, 50, 1, 2, ok)}, true},
		{"an unknown write applied", []safety.RegisterOp{rop(0, 0, 10, 0, 1, safety.Unknown), rop(1, 20, 30, 1, 2, ok)}, true},
		{"an unknown write, then a lost update", []safety.RegisterOp{rop(0, 0, 10, 0, 1, safety.Unknown), rop(1, 20, 30, 1, 2, ok), rop(2, 25, 35, 1, 2, ok)}, false},
		{"readers beside each other, then a writer", []safety.RegisterOp{reads(0, 0, 10, 0, 0), reads(1, 5, 15, 0, 0), rop(2, 20, 30, 0, 1, ok),
			reads(0, 40, 50, 1, 1)}, true},
		{"a write inside a reader's section", []safety.RegisterOp{reads(0, 0, 30, 0, 1), rop(1, 5, 15, 0, 1, ok)}, false},
		{"a reader sees a stale value", []safety.RegisterOp{rop(1, 0, 10, 0, 1, ok), reads(0, 20, 30, 0, 0)}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := safety.NewHistory()
			for _, o := range c.ops {
				h.AddRegisterOp(o)
			}
			vs, err := safety.CheckHistories(h, t.TempDir(), "model")
			require.NoError(t, err)
			if c.ok {
				assert.Empty(t, vs)
				return
			}
			require.Len(t, vs, 1)
			assert.Equal(t, safety.RegisterHistory, vs[0].Kind)
			assertVisualised(t, vs[0])
		})
	}
}

// assertVisualised checks that v names porcupine's visualisation, written.
func assertVisualised(t *testing.T, v safety.Violation) {
	t.Helper()
	require.NotEmpty(t, v.File)
	assert.Contains(t, v.String(), v.File, "the violation names the file")
	b, err := os.ReadFile(v.File)
	require.NoError(t, err)
	assert.Contains(t, string(b), "<html", "porcupine's visualisation")
}
