package safety_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/conformance/safety"
	"github.com/quorumlock/quorumlock/core"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func newNode(addr string) (core.Node, func() error, error) {
	c := redis.NewClient(goredis.ClientOptions(addr))
	n, err := goredis.New(c)
	return n, c.Close, err
}

func TestSchedule(t *testing.T) {
	cfg := safety.ScheduleConfig{Seed: 7, Duration: 8 * time.Second, Nodes: 5, Clients: 16, MaxFaulty: 2,
		TTL: time.Second, NodeTimeout: 50 * time.Millisecond}
	a, b := safety.Schedule(cfg), safety.Schedule(cfg)
	require.Equal(t, a, b, "one seed, one schedule")
	cfg.Seed = 8
	assert.NotEqual(t, a, safety.Schedule(cfg), "another seed, another schedule")

	for seed := range int64(50) {
		cfg.Seed = seed
		faults := safety.Schedule(cfg)
		kinds := map[safety.FaultKind]bool{}
		for i, f := range faults {
			kinds[f.Kind] = true
			assert.Less(t, f.At, cfg.Duration)
			if i > 0 {
				assert.Greater(t, f.At, faults[i-1].At, "in order")
			}
			switch f.Kind {
			case safety.KillRestart:
				assert.Greater(t, f.Duration, cfg.TTL, "a killed node stays down for more than the TTL")
			case safety.Latency:
				assert.Greater(t, f.Delay, cfg.NodeTimeout, "latency spikes exceed the node timeout")
			case safety.ClientPause:
				assert.Greater(t, f.Duration, cfg.TTL, "a stalled client outlives its validity")
			}
		}
		assert.Len(t, kinds, len(safety.AllFaults), "seed %d injects every kind", seed)
		assert.LessOrEqual(t, maxFaulty(faults), cfg.MaxFaulty, "seed %d: never more than a minority faulty at once", seed)
		assertRingAlone(t, seed, faults)
	}
}

// assertRingAlone checks that no node fault overlaps a majorities ring:
// each client then still reaches its whole majority.
func assertRingAlone(t *testing.T, seed int64, faults []safety.Fault) {
	for _, r := range faults {
		if r.Kind != safety.Ring {
			continue
		}
		assert.Greater(t, r.Duration, time.Duration(0), "seed %d: a ring lasts", seed)
		for _, f := range faults {
			if f.Kind == safety.Ring || f.Kind == safety.ClientPause {
				continue
			}
			end := f.At + f.Duration
			if f.Kind == safety.KillRestart {
				end += time.Second // until its restart is done
			}
			assert.False(t, f.At <= r.At+r.Duration && r.At <= end, "seed %d: %v overlaps %v", seed, f, r)
		}
	}
}

// maxFaulty is the most nodes faulty at one instant in a schedule, each
// fault counted from its start to its end.
func maxFaulty(faults []safety.Fault) int {
	most := 0
	nodeFault := func(f safety.Fault) bool { return f.Kind != safety.ClientPause && f.Kind != safety.Ring }
	for _, f := range faults {
		if !nodeFault(f) {
			continue
		}
		nodes := map[int]bool{}
		for _, g := range faults {
			if nodeFault(g) && g.At <= f.At && f.At <= g.At+g.Duration {
				nodes[g.Target] = true
			}
		}
		most = max(most, len(nodes))
	}
	return most
}

// seeds are the seeds of TestSafety: QUORUMLOCK_SAFETY_SEEDS (comma
// separated) replays others.
func seeds(t *testing.T) []int64 {
	env := os.Getenv("QUORUMLOCK_SAFETY_SEEDS")
	if env == "" {
		return []int64{1, 2, 3}
	}
	var out []int64
	for f := range strings.SplitSeq(env, ",") {
		s, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		require.NoError(t, err, "QUORUMLOCK_SAFETY_SEEDS")
		out = append(out, s)
	}
	return out
}

// TestSafety is the short safety run of every CI run: five servers behind
// fault proxies, 16 clients with their own Lockers on three keys, every
// fault kind, a few seeds. make chaos runs the long one (cmd/chaos). A
// history found not linearizable is drawn into QUORUMLOCK_SAFETY_DIR
// (default: the system's temporary directory, so the file outlives the
// test), and the violation names the file.
func TestSafety(t *testing.T) {
	redistest.RequireServer(t)
	for _, seed := range seeds(t) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rep, err := safety.Run(t.Context(), safety.Config{
				Seed: seed, Duration: 8 * time.Second, Nodes: 5, Clients: 16, NewNode: newNode,
				Logf: t.Logf, HistoryDir: os.Getenv("QUORUMLOCK_SAFETY_DIR"),
			})
			require.NoError(t, err)
			t.Log(rep)
			for _, v := range rep.Violations {
				t.Errorf("violation (replay: QUORUMLOCK_SAFETY_SEEDS=%d): %v", seed, v)
			}
			for _, k := range safety.AllFaults {
				assert.Positive(t, rep.Faults[k], "fault %s injected", k)
			}
			assert.Positive(t, rep.Sections, "locks were used")
			assert.Equal(t, rep.Stalls, rep.Noticed, "every stalled holder noticed before use")
			assert.Zero(t, rep.LeftAfterTTL, "no lock key outlives its TTL")
		})
	}
}

// TestWorkloads is a short run of each workload besides the mutex's, under
// every fault kind: shared locks that read a register beside writers that
// update it, and overlapping sets of keys. make chaos runs the long ones.
func TestWorkloads(t *testing.T) {
	redistest.RequireServer(t)
	for _, w := range []safety.Workload{safety.ReadWriteWorkload, safety.MultiKeyWorkload, safety.SemaphoreWorkload, safety.ElectionWorkload} {
		t.Run(string(w), func(t *testing.T) {
			rep, err := safety.Run(t.Context(), safety.Config{
				Seed: 1, Workload: w, Duration: 3 * time.Second, Nodes: 5, Clients: 12, NewNode: newNode,
				Logf: t.Logf, HistoryDir: os.Getenv("QUORUMLOCK_SAFETY_DIR"),
			})
			require.NoError(t, err)
			t.Log(rep)
			for _, v := range rep.Violations {
				t.Errorf("violation: %v", v)
			}
			switch w {
			case safety.ReadWriteWorkload:
				assert.Positive(t, rep.Readers, "shared locks were used")
				assert.Less(t, rep.Readers, rep.Sections, "so were writers")
			case safety.MultiKeyWorkload:
				assert.Positive(t, rep.Sets, "sets were used")
			default:
				assert.Positive(t, rep.Sections, "permits or terms were used")
			}
			assert.Zero(t, rep.LeftAfterTTL, "no lock key outlives its TTL")
		})
	}
}

func TestWorkloadConfig(t *testing.T) {
	_, err := safety.Run(t.Context(), safety.Config{Workload: "queue", NewNode: newNode})
	require.ErrorContains(t, err, `unknown workload "queue"`)
	_, err = safety.Run(t.Context(), safety.Config{Workload: safety.ReadWriteWorkload, Clients: safety.MaxReaders + 1, NewNode: newNode})
	require.ErrorContains(t, err, "at most 64 clients")
}

// TestCheckerFires shows that the checks can fail: the scenario the
// Redlock specification says breaks safety, a node restarted at once
// without persistence while a lock is held on it. Client A holds the lock
// on nodes 0 and 1 (node 2 is cut off) and reads the register; node 1
// restarts empty at once; B asks once node 2 is back. Without the restart
// guard, B gets nodes 1 and 2, and updates the register while A still
// works: porcupine finds both the mutex history and the register history
// not linearizable, and writes their visualisations. With the guard, node
// 1 does not vote, B is refused, and both histories pass.
func TestCheckerFires(t *testing.T) {
	redistest.RequireServer(t)
	for _, c := range []struct {
		name  string
		opts  []core.Option
		fires bool
	}{
		{"guard off", []core.Option{core.WithRestartGuard(0)}, true},
		{"guard on", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			rig, err := safety.StartRig(ctx, 3)
			require.NoError(t, err)
			defer rig.Close()
			regs, err := safety.StartRegisters(ctx)
			require.NoError(t, err)
			defer regs.Close()
			newLocker := func() *core.Locker {
				nodes := make([]core.Node, 3)
				for i, addr := range rig.Addrs() {
					n, closeClient, err := newNode(addr)
					require.NoError(t, err)
					t.Cleanup(func() { _ = closeClient() }) // after the Locker's
					nodes[i] = n
				}
				// One try, so B's refusal is the guard's; a node timeout
				// that a busy machine's scheduler does not exceed.
				opts := append([]core.Option{core.WithTTL(5 * time.Second), core.WithNodeTimeout(time.Second), core.WithTries(1)}, c.opts...)
				l, err := core.New(nodes, opts...)
				require.NoError(t, err)
				t.Cleanup(func() { _ = l.Close() })
				return l
			}
			h := safety.NewHistory()
			r := recorder{h: h, regs: regs}

			a := newLocker()
			require.NoError(t, rig.Proxies[2].Partition())
			held, validA, err := r.acquire(ctx, 0, a)
			require.NoError(t, err, "nodes 0 and 1 grant")
			require.NoError(t, rig.Proxies[2].Heal())

			aRead, bDone, aDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
			go func() { // A reads the register, and writes it once B has had its turn
				defer close(aDone)
				assert.NoError(t, r.use(ctx, 0, held, validA, func() { close(aRead); <-bDone }))
			}()
			<-aRead

			require.NoError(t, rig.Servers[1].Restart(ctx), "at once, empty")
			b := newLocker()
			second, validB, err := r.acquire(ctx, 1, b)
			if c.fires {
				require.NoError(t, err, "nodes 1 (restarted) and 2 grant")
				require.NoError(t, r.use(ctx, 1, second, validB, nil))
				r.release(ctx, 1, second)
			} else {
				require.ErrorIs(t, err, core.ErrNodeRestarted, "node 1 does not vote")
				require.ErrorIs(t, err, core.ErrNotAcquired)
			}
			close(bDone)
			<-aDone
			r.release(ctx, 0, held)
			require.Len(t, h.Sections(), map[bool]int{true: 2, false: 1}[c.fires])

			assert.Empty(t, safety.Check(h.Sections(), false), "every section within its validity")
			violations, err := safety.CheckHistories(h, t.TempDir(), "fires")
			require.NoError(t, err)
			if !c.fires {
				assert.Empty(t, violations)
				return
			}
			require.Len(t, violations, 2)
			assert.Equal(t, safety.LockHistory, violations[0].Kind)
			assert.Equal(t, safety.RegisterHistory, violations[1].Kind)
			for _, v := range violations {
				assertVisualised(t, v)
				t.Log("porcupine fired: ", v)
			}
		})
	}
}

// recorder does, and records in h, what a client of the rig does.
type recorder struct {
	h    *safety.History
	regs *safety.Registers
}

func (r recorder) acquire(ctx context.Context, client int, l *core.Locker) (*core.Lock, time.Duration, error) {
	op := safety.LockOp{Client: client, Key: "k", Kind: safety.Acquire, Call: r.h.Now()}
	lock, err := l.TryAcquire(ctx, "k")
	op.Return, op.Outcome = r.h.Now(), safety.OutcomeOf(err)
	if err == nil {
		op.ValidUntil = op.Return + lock.Validity()
	}
	r.h.AddLockOp(op)
	return lock, op.ValidUntil, err
}

// use records a section around the register's update, running during
// between its read and its write.
func (r recorder) use(ctx context.Context, client int, l *core.Lock, validUntil time.Duration, during func()) error {
	s := safety.Section{Client: client, Key: l.Key(), Start: r.h.Now(), ValidUntil: validUntil}
	err := r.regs.Update(ctx, r.h, client, l.Key(), during)
	s.End = r.h.Now()
	r.h.Add(s)
	return err
}

func (r recorder) release(ctx context.Context, client int, l *core.Lock) {
	op := safety.LockOp{Client: client, Key: l.Key(), Kind: safety.Release, Call: r.h.Now()}
	err := l.Release(ctx)
	op.Return, op.Outcome = r.h.Now(), safety.OutcomeOf(err)
	r.h.AddLockOp(op)
}
