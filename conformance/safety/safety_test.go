package safety_test

import (
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
// fault kind, a few seeds. make chaos runs the long one (cmd/chaos).
func TestSafety(t *testing.T) {
	redistest.RequireServer(t)
	for _, seed := range seeds(t) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rep, err := safety.Run(t.Context(), safety.Config{
				Seed: seed, Duration: 8 * time.Second, Nodes: 5, Clients: 16, NewNode: newNode,
				Logf: t.Logf,
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

// TestCheckerFires shows that the checker can fail: the scenario the
// Redlock specification says breaks safety, a node restarted at once
// without persistence while a lock is held on it. Client A holds the lock
// on nodes 0 and 1 (node 2 is cut off); node 1 restarts empty at once; B
// asks once node 2 is back. Without the restart guard, B gets nodes 1 and
// 2 while A still works: the checker reports the overlap. With it, node 1
// does not vote, B is refused, and the checker stays silent.
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
			newLocker := func() *core.Locker {
				nodes := make([]core.Node, 3)
				for i, addr := range rig.Addrs() {
					n, closeClient, err := newNode(addr)
					require.NoError(t, err)
					t.Cleanup(func() { _ = closeClient() }) // after the Locker's
					nodes[i] = n
				}
				opts := append([]core.Option{core.WithTTL(5 * time.Second), core.WithTries(1)}, c.opts...)
				l, err := core.New(nodes, opts...)
				require.NoError(t, err)
				t.Cleanup(func() { _ = l.Close() })
				return l
			}
			h := safety.NewHistory()
			var drift time.Duration
			use := func(client int, l *core.Lock, t0 time.Duration, until func()) {
				s := safety.Section{Client: client, Key: l.Key(), Start: h.Now(), ValidUntil: t0 + 5*time.Second - drift}
				until()
				s.End = h.Now()
				h.Add(s)
			}

			a := newLocker()
			drift = a.Drift()
			require.NoError(t, rig.Proxies[2].Partition())
			t0 := h.Now()
			held, err := a.TryAcquire(ctx, "k")
			require.NoError(t, err, "nodes 0 and 1 grant")
			require.NoError(t, rig.Proxies[2].Heal())

			bDone, aDone := make(chan struct{}), make(chan struct{})
			go func() { // A works until B has had its turn
				defer close(aDone)
				use(0, held, t0, func() { <-bDone })
			}()

			require.NoError(t, rig.Servers[1].Restart(ctx), "at once, empty")
			b := newLocker()
			t1 := h.Now()
			second, err := b.TryAcquire(ctx, "k")
			if c.fires {
				require.NoError(t, err, "nodes 1 (restarted) and 2 grant")
				use(1, second, t1, func() {})
				require.NoError(t, second.Release(ctx))
			} else {
				require.ErrorIs(t, err, core.ErrNodeRestarted, "node 1 does not vote")
				require.ErrorIs(t, err, core.ErrNotAcquired)
			}
			close(bDone)
			<-aDone
			require.Len(t, h.Sections(), map[bool]int{true: 2, false: 1}[c.fires])

			violations := safety.Check(h.Sections(), false)
			if c.fires {
				require.Len(t, violations, 1)
				assert.Equal(t, safety.Overlap, violations[0].Kind)
				t.Log("the checker fired: ", violations[0])
			} else {
				assert.Empty(t, violations)
			}
			_ = held.Release(ctx)
		})
	}
}
