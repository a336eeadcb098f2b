package safety

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/conformance/redistest"
)

// registerTimeout bounds each command to the registers' server.
const registerTimeout = time.Second

// Registers is a plain redis-server, outside the rig and untouched by its
// faults (so linearizable on its own), that keeps a register per lock key:
// the resource the lock protects. Holders change it by read-modify-write
// (GET, then SET of the value read plus one), which is atomic only if the
// lock excludes every other holder: CheckHistories finds the updates that
// interleaved, whether or not their clients could see it.
type Registers struct {
	server *redistest.Server
	client *redis.Client
}

// StartRegisters starts the registers' server.
func StartRegisters(ctx context.Context) (*Registers, error) {
	s, err := redistest.StartServer(ctx, redistest.WithFresh(true))
	if err != nil {
		return nil, fmt.Errorf("safety: registers' server: %w", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	return &Registers{server: s, client: c}, nil
}

// Close stops the registers' server.
func (r *Registers) Close() error {
	return errors.Join(r.client.Close(), r.server.Close())
}

// Update is UpdateAll of key alone.
func (r *Registers) Update(ctx context.Context, h *History, client int, key string, during func()) error {
	return r.UpdateAll(ctx, h, client, []string{key}, during)
}

// UpdateAll reads the register of each key, runs during (the rest of the
// holder's work), and writes each the value read plus one, and records a
// read-modify-write of each register in h as client's, each spanning the
// whole update: OK once its write is acknowledged, Unknown if its write
// (or an earlier key's) failed, since it may have been applied. A read
// that failed records nothing and writes nothing. Each command is bounded
// by registerTimeout, and not cut short by ctx's cancellation (a holder
// finishes its update).
func (r *Registers) UpdateAll(ctx context.Context, h *History, client int, keys []string, during func()) error {
	ctx = context.WithoutCancel(ctx)
	call := h.Now()
	ops := make([]RegisterOp, len(keys))
	for i, key := range keys {
		v, err := r.get(ctx, key)
		if err != nil {
			return err
		}
		ops[i] = RegisterOp{Client: client, Key: key, Call: call, Read: v, Wrote: v + 1, Outcome: OK}
	}
	if during != nil {
		during()
	}
	var err error
	for i := range ops {
		if err == nil {
			sctx, cancel := context.WithTimeout(ctx, registerTimeout)
			err = r.client.Set(sctx, registerKey(ops[i].Key), ops[i].Wrote, 0).Err()
			cancel()
		}
		if err != nil { // this write, or an earlier one, failed: not sent, or maybe applied
			ops[i].Outcome = Unknown
		}
	}
	ret := h.Now()
	for _, op := range ops {
		op.Return = ret
		h.AddRegisterOp(op)
	}
	if err != nil {
		return fmt.Errorf("safety: writing the registers of %q: %w", keys, err)
	}
	return nil
}

// Read is a reader's section on key's register: it reads the register,
// runs during, and reads it again, and records both reads in h as
// client's (RegisterOp.Reader). A read that failed records nothing.
func (r *Registers) Read(ctx context.Context, h *History, client int, key string, during func()) error {
	ctx = context.WithoutCancel(ctx)
	op := RegisterOp{Client: client, Key: key, Reader: true, Outcome: OK, Call: h.Now()}
	var err error
	if op.Read, err = r.get(ctx, key); err != nil {
		return err
	}
	if during != nil {
		during()
	}
	if op.Again, err = r.get(ctx, key); err != nil {
		return err
	}
	op.Return = h.Now()
	h.AddRegisterOp(op)
	return nil
}

// Count is a permit holder's section on key: it increments the count of
// key's holders (INCR), runs during, and decrements it (DECR), and
// returns the count the increment read, which counts this holder. Each
// command is bounded by registerTimeout and not cut short by ctx's
// cancellation. A failed increment runs nothing.
func (r *Registers) Count(ctx context.Context, key string, during func()) (int64, error) {
	ctx = context.WithoutCancel(ctx)
	ictx, cancel := context.WithTimeout(ctx, registerTimeout)
	n, err := r.client.Incr(ictx, countKey(key)).Result()
	cancel()
	if err != nil {
		return 0, fmt.Errorf("safety: counting the holders of %q: %w", key, err)
	}
	if during != nil {
		during()
	}
	dctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	if err := r.client.Decr(dctx, countKey(key)).Err(); err != nil {
		return n, fmt.Errorf("safety: counting the holders of %q: %w", key, err)
	}
	return n, nil
}

func countKey(key string) string { return "holders:" + key }

// get reads key's register: 0 when it was never written.
func (r *Registers) get(ctx context.Context, key string) (int64, error) {
	gctx, cancel := context.WithTimeout(ctx, registerTimeout)
	v, err := r.client.Get(gctx, registerKey(key)).Result()
	cancel()
	switch {
	case errors.Is(err, redis.Nil):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("safety: reading the register of %q: %w", key, err)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("safety: the register of %q holds %q: %w", key, v, err)
	}
	return n, nil
}

func registerKey(key string) string { return "register:" + key }
