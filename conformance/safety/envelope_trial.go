package safety

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/core"
)

// writeEvery is how often the holder writes the register while its lock
// says it is valid.
const writeEvery = 2 * time.Millisecond

// otherClient is the value of the key another client holds on node 2
// while the holder asks; releaseOther is that client's release.
const otherClient = "envelope:other-client"

var releaseOther = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// trial is one holder and its successor on a key of their own.
type trial struct {
	key               string
	pause             time.Duration
	ttl               time.Duration
	pollFrom          time.Duration // when the successor starts asking, from the holder's grant
	holder, successor *core.Locker
	third             *redis.Client // node 2, where another client's key refuses the holder
	reg               *register
	clock             func() time.Duration
}

// outcome is what a trial saw.
type outcome struct {
	skipped     string // why the trial could not be set up; "" if it ran
	violation   bool
	doubleHold  bool
	refused     int
	validFor    time.Duration
	successorAt time.Duration
}

// run sets node 2 against the holder, has the holder take the key on nodes
// 0 and 1 and use it, and its successor take it after it, and reads the
// register.
func (t *trial) run(ctx context.Context) (outcome, error) {
	// Another client holds the key on node 2 while the holder asks, and
	// releases it right after.
	if err := t.third.Set(ctx, t.key, otherClient, t.ttl).Err(); err != nil {
		return outcome{}, fmt.Errorf("safety: setting node 2 against the holder: %w", err)
	}
	lock, err := t.holder.TryAcquire(ctx, t.key)
	grant := t.clock()
	if rerr := releaseOther.Run(ctx, t.third, []string{t.key}, otherClient).Err(); rerr != nil {
		if err == nil {
			release(ctx, lock, t.ttl)
		}
		return outcome{}, fmt.Errorf("safety: releasing node 2 after the holder: %w", rerr)
	}
	if err != nil {
		return outcome{skipped: "holder not granted: " + core.Reason(err)}, nil
	}
	validUntil := grant + lock.Validity()
	succeeded := make(chan successor, 1)
	go func() { succeeded <- t.succeed(ctx, grant) }()
	t.use(ctx, lock)
	release(ctx, lock, t.ttl)
	s := <-succeeded
	if s.err != nil {
		return outcome{}, s.err
	}
	if !s.granted {
		return outcome{skipped: "successor not granted"}, nil
	}
	return outcome{
		violation: t.reg.violated(), doubleHold: s.at < validUntil, refused: t.reg.refused,
		validFor: validUntil - grant, successorAt: s.at - grant,
	}, nil
}

// use is the holder's work: it checks its validity, pauses (between the
// check and the use, as a GC pause can), writes, and goes on writing every
// writeEvery for as long as the lock says it is valid, checking before each
// write.
func (t *trial) use(ctx context.Context, lock *core.Lock) {
	if lock.Validity() <= 0 {
		return
	}
	if waitCtx(ctx, t.pause) != nil {
		return
	}
	for {
		t.reg.write(holderRank, lock.Token())
		if waitCtx(ctx, writeEvery) != nil || lock.Validity() <= 0 {
			return
		}
	}
}

// successor is what the successor got.
type successor struct {
	granted bool
	at      time.Duration
	err     error
}

// succeed asks for the key every millisecond from pollFrom after the
// holder's grant until it is granted (within 2 TTL and the pause), then
// writes the register and releases.
func (t *trial) succeed(ctx context.Context, grant time.Duration) successor {
	if err := waitCtx(ctx, grant+t.pollFrom-t.clock()); err != nil {
		return successor{err: err}
	}
	pctx, cancel := context.WithTimeout(ctx, 2*t.ttl+t.pause)
	defer cancel()
	for {
		lock, err := t.successor.TryAcquire(pctx, t.key)
		if err == nil {
			s := successor{granted: true, at: t.clock()}
			t.reg.write(successorRank, lock.Token())
			release(ctx, lock, t.ttl)
			return s
		}
		if errors.Is(err, core.ErrInvalidArgument) || errors.Is(err, core.ErrClosed) {
			return successor{err: err}
		}
		if waitCtx(pctx, time.Millisecond) != nil {
			return successor{err: ctx.Err()} // nil unless the caller's context ended
		}
	}
}

// release releases lock within a TTL, even after ctx has ended.
func release(ctx context.Context, lock *core.Lock, ttl time.Duration) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ttl)
	defer cancel()
	_ = lock.Release(ctx)
}

// The ranks of a trial's clients, in the order of their grants.
const (
	holderRank    = 0
	successorRank = 1
)

// register is the resource a trial's lock protects: one value, written by
// the clients that hold the lock. Fenced, it refuses a token below the
// highest it has accepted, as storage that checks fencing tokens does;
// otherwise it accepts every write. It logs the ranks of accepted writes.
type register struct {
	fenced  bool
	mu      sync.Mutex
	top     int64
	log     []int
	refused int
}

func (r *register) write(rank int, token int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fenced && len(r.log) > 0 && token < r.top {
		r.refused++
		return
	}
	r.top = max(r.top, token)
	r.log = append(r.log, rank)
}

// violated says whether the register accepted a write of a client after
// one of a client granted the lock later.
func (r *register) violated() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	highest := -1
	for _, rank := range r.log {
		if rank < highest {
			return true
		}
		highest = max(highest, rank)
	}
	return false
}
