package measure

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/benchmarks/internal/systems"
)

// hangingInstance grants every lock at once, except that its hang-th
// acquisition blocks until Close.
type hangingInstance struct {
	hang    int64
	n       atomic.Int64
	closed  chan struct{}
	closeMu sync.Once
}

type noopHeld struct{}

func (noopHeld) Release(context.Context) error { return nil }

func (h *hangingInstance) Acquire(ctx context.Context, key string) (systems.Held, error) {
	if h.n.Add(1) == h.hang {
		<-h.closed
		return nil, errors.New("closed")
	}
	return noopHeld{}, nil
}

func (h *hangingInstance) Contender(key string) systems.Acquirer { return nil }

func (h *hangingInstance) Close() error {
	h.closeMu.Do(func() { close(h.closed) })
	return nil
}

func TestThroughputAbortsHungOperations(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the watchdog")
	}
	inst := &hangingInstance{hang: WarmupOps + 100, closed: make(chan struct{})}
	wd := Watchdog{Abort: func() { _ = inst.Close() }}
	start := time.Now()
	res, err := RunThroughput(wd, inst, 4, 100*time.Millisecond, 0, "k:")
	if err != nil {
		t.Fatal(err)
	}
	if res.Hung != 1 || res.Ops == 0 || res.Errors != 0 {
		t.Errorf("hung %d, ops %d, errors %d; want 1, some, 0", res.Hung, res.Ops, res.Errors)
	}
	if res.Elapsed > 200*time.Millisecond {
		t.Errorf("elapsed %v counts the hang", res.Elapsed)
	}
	if took := time.Since(start); took > hangGrace+2*time.Second {
		t.Errorf("took %v", took)
	}
}
