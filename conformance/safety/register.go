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

// Update reads key's register, runs during (the rest of the holder's
// work), and writes the value read plus one, and records the
// read-modify-write in h as client's: OK once the write is acknowledged,
// Unknown if it failed (it may have been applied). A read that failed
// records nothing and writes nothing. Each command is bounded by
// registerTimeout, and not cut short by ctx's cancellation (a holder
// finishes its update).
func (r *Registers) Update(ctx context.Context, h *History, client int, key string, during func()) error {
	ctx = context.WithoutCancel(ctx)
	op := RegisterOp{Client: client, Key: key, Call: h.Now()}
	gctx, cancel := context.WithTimeout(ctx, registerTimeout)
	v, err := r.client.Get(gctx, registerKey(key)).Result()
	cancel()
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		return fmt.Errorf("safety: reading the register of %q: %w", key, err)
	default:
		if op.Read, err = strconv.ParseInt(v, 10, 64); err != nil {
			return fmt.Errorf("safety: the register of %q holds %q: %w", key, v, err)
		}
	}
	if during != nil {
		during()
	}
	op.Wrote = op.Read + 1
	sctx, cancel := context.WithTimeout(ctx, registerTimeout)
	err = r.client.Set(sctx, registerKey(key), op.Wrote, 0).Err()
	cancel()
	op.Return, op.Outcome = h.Now(), OK
	if err != nil {
		op.Outcome = Unknown
		err = fmt.Errorf("safety: writing the register of %q: %w", key, err)
	}
	h.AddRegisterOp(op)
	return err
}

func registerKey(key string) string { return "register:" + key }
