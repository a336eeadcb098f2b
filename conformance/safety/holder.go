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
	op := LockOp{Client: h.client, Key: lock.Key(), Kind: Extend, Call: h.hist.Now()}
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

// section is one use of the resource: the register's read-modify-write
// around up to maxWork, recorded as a Section.
func (h *holder) section(ctx context.Context, lock *core.Lock, validUntil time.Duration) error {
	s := Section{Client: h.client, Key: lock.Key(), Token: lock.Token(), ValidUntil: validUntil}
	s.Start = h.hist.Now()
	err := h.regs.Update(ctx, h.hist, h.client, s.Key, func() { work(h.rng) })
	s.End = h.hist.Now()
	h.hist.Add(s)
	return err
}

// release releases lock, under a context of its own, and records it.
func (h *holder) release(ctx context.Context, lock *core.Lock) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*h.ttl)
	defer cancel()
	op := LockOp{Client: h.client, Key: lock.Key(), Kind: Release, Call: h.hist.Now()}
	err := lock.Release(rctx)
	op.Return, op.Outcome = h.hist.Now(), OutcomeOf(err)
	h.hist.AddLockOp(op)
}
