package measure

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/benchmarks/internal/systems"
)

// stallingInstance grants every lock at once, except that every stall-th
// acquisition, and every release when stallRelease is set, waits until its
// context ends, as over a hung server that the system waits out.
type stallingInstance struct {
	stall        int64
	stallRelease bool
	n            atomic.Int64
}

type stallingHeld struct{ inst *stallingInstance }

func (h stallingHeld) Release(ctx context.Context) error {
	if h.inst.stallRelease {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (s *stallingInstance) Acquire(ctx context.Context, key string) (systems.Held, error) {
	if s.stall > 0 && s.n.Add(1)%s.stall == 0 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return stallingHeld{s}, nil
}

func (s *stallingInstance) Contender(key string) systems.Acquirer { return nil }

func (s *stallingInstance) Close() error { return nil }

func TestThroughputBoundsOperations(t *testing.T) {
	const opTimeout = 20 * time.Millisecond
	// Every acquisition waits out its context: nothing succeeds, and
	// nothing hangs.
	start := time.Now()
	res, err := RunThroughput(Watchdog{}, &stallingInstance{stall: 1}, 1, 100*time.Millisecond, opTimeout, "k:")
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops != 0 || res.OpsPerSec != 0 || res.Errors == 0 || res.Hung != 0 {
		t.Errorf("ops %d (%v/s), errors %d, hung %d; want 0, 0, some, 0", res.Ops, res.OpsPerSec, res.Errors, res.Hung)
	}
	if res.FirstError != context.DeadlineExceeded.Error() {
		t.Errorf("first error %q, want the deadline", res.FirstError)
	}
	if res.OpTimeout != opTimeout {
		t.Errorf("op timeout %v, want %v", res.OpTimeout, opTimeout)
	}
	if took := time.Since(start); took > DegradedWarmup+time.Second {
		t.Errorf("took %v", took)
	}

	// Every third acquisition stalls: the others count, with their acquire
	// latency.
	res, err = RunThroughput(Watchdog{}, &stallingInstance{stall: 3}, 2, 100*time.Millisecond, opTimeout, "k:")
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops == 0 || res.Errors == 0 || res.Hung != 0 {
		t.Errorf("ops %d, errors %d, hung %d; want some, some, 0", res.Ops, res.Errors, res.Hung)
	}
	if res.AcquireP99 <= 0 || res.AcquireP99 > res.P99 || res.AcquireP99 >= opTimeout {
		t.Errorf("acquire p99 %v, p99 %v: want 0 < acquire p99 ≤ p99, below %v", res.AcquireP99, res.P99, opTimeout)
	}
}

func TestWarmupForCountsFailures(t *testing.T) {
	ok, failed, err := WarmupFor(Watchdog{}, &stallingInstance{stall: 2}, 2, 50*time.Millisecond, 10*time.Millisecond, "w:")
	if err != nil {
		t.Fatal(err)
	}
	if ok == 0 || failed == 0 {
		t.Errorf("%d operations succeeded, %d failed; want some of each", ok, failed)
	}
}

// stallingLock is a lock for contenders whose releases wait until their
// context ends before they free it.
type stallingLock struct{ sem chan struct{} }

type stallingLockHeld struct{ l *stallingLock }

func (l *stallingLock) Acquire(ctx context.Context) (systems.Held, error) {
	select {
	case l.sem <- struct{}{}:
		return stallingLockHeld{l}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (h stallingLockHeld) Release(ctx context.Context) error {
	<-ctx.Done()
	<-h.l.sem
	return ctx.Err()
}

func TestContentionBoundsReleases(t *testing.T) {
	l := &stallingLock{sem: make(chan struct{}, 1)}
	acquirers := []systems.Acquirer{l, l, l, l}
	start := time.Now()
	res, err := RunContention(Watchdog{}, acquirers, 100*time.Millisecond, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res.Acquisitions == 0 || res.ReleaseErrors == 0 || res.Hung != 0 || res.Violations != 0 {
		t.Errorf("acquisitions %d, release errors %d, hung %d, violations %d; want some, some, 0, 0",
			res.Acquisitions, res.ReleaseErrors, res.Hung, res.Violations)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("took %v: releases not bounded", took)
	}
}
