package safety

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/quorumlock/quorumlock/core"
)

// holder is one client of a run, as it uses and releases the locks it
// holds, recording every operation in hist.
type holder struct {
	client int
	ttl    time.Duration
	hist   *History
	regs   *Registers
	rng    *rand.Rand
	// permits is K of the semaphores whose permits it takes, 0 when it
	// takes other locks.
	permits int
}

// use is the holder's work under lock, whose validity ends at validUntil:
// a section around the register's read-modify-write. One time in four it
// then extends the lock and, if that leaves room for the work, works
// again in a second section. It fails only if the registers' server did.
func (h *holder) use(ctx context.Context, lock *core.Lock, validUntil time.Duration) error {
	if err := h.section(ctx, lock, validUntil); err != nil || h.rng.IntN(4) != 0 {
		return err
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*h.ttl)
	op := h.lockOp(lock, Extend)
	op.Call = h.hist.Now()
	err := lock.Extend(ectx)
	cancel()
	op.Return, op.Outcome = h.hist.Now(), OutcomeOf(err)
	if err == nil {
		op.ValidUntil = op.Return + lock.Validity() // the clock read first
	}
	h.hist.AddLockOp(op)
	if err != nil || lock.Err() != nil || lock.Validity() < minUse {
		return nil
	}
	return h.section(ctx, lock, op.ValidUntil)
}

// section is one use of the resource, recorded as a Section, around up to
// maxWork: under a shared lock, two reads of the key's register, at its
// start and at its end; under a permit, the count of the key's holders
// incremented and decremented around it; else the read-modify-write of
// every key's register.
func (h *holder) section(ctx context.Context, lock *core.Lock, validUntil time.Duration) error {
	s := Section{Client: h.client, Key: lock.Key(), Keys: lock.Keys(), Shared: lock.Shared(), Permits: h.permits, Token: lock.Token(), ValidUntil: validUntil}
	during := func() { work(h.rng) }
	s.Start = h.hist.Now()
	var err error
	switch {
	case s.Permits > 0:
		s.Count, err = h.regs.Count(ctx, s.Key, during)
	case s.Shared:
		err = h.regs.Read(ctx, h.hist, h.client, s.Key, during)
	default:
		err = h.regs.UpdateAll(ctx, h.hist, h.client, s.Keys, during)
	}
	s.End = h.hist.Now()
	h.hist.Add(s)
	return err
}

// release releases lock, under a context of its own, and records it.
func (h *holder) release(ctx context.Context, lock *core.Lock) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*h.ttl)
	defer cancel()
	op := h.lockOp(lock, Release)
	op.Call = h.hist.Now()
	err := lock.Release(rctx)
	op.Return, op.Outcome = h.hist.Now(), OutcomeOf(err)
	h.hist.AddLockOp(op)
}

// lockOp is the holder's operation of kind on lock, to be timed.
func (h *holder) lockOp(lock *core.Lock, kind LockOpKind) LockOp {
	return LockOp{Client: h.client, Key: lock.Key(), Keys: lock.Keys(), Shared: lock.Shared(), Permits: h.permits, Kind: kind}
}
