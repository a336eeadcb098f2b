package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/strategies"
)

// Strategy is one strategy the suite runs the locker properties under.
type Strategy struct {
	Name string
	New  func() strategies.Strategy
}

// Strategies are the strategies Run covers unless told otherwise: each
// built-in one, greedy and stopping at quorum.
func Strategies() []Strategy {
	return []Strategy{
		{"sequential", func() strategies.Strategy { return strategies.Sequential() }},
		{"sequential-stop", func() strategies.Strategy { return strategies.Sequential(strategies.WithStopAtQuorum(true)) }},
		{"parallel", func() strategies.Strategy { return strategies.Parallel() }},
		{"parallel-stop", func() strategies.Strategy { return strategies.Parallel(strategies.WithStopAtQuorum(true)) }},
		{"failfast", func() strategies.Strategy { return strategies.FailFast() }},
		{"failfast-stop", func() strategies.Strategy { return strategies.FailFast(strategies.WithStopAtQuorum(true)) }},
	}
}

// Sizes are the node counts of the locker properties' full matrix.
var Sizes = []int{1, 3, 5}

// driverSize is the node count of the driver scope's one point of the
// matrix, with the strategy parallel (see the package doc, Scope).
const driverSize = 3

// LongEnv is the environment variable that, set to 1 (make long), gives
// every Run the full matrix and the long forms of its long checks.
const LongEnv = "QUORUMLOCK_LONG"

// The short and long forms of the long checks (see WithIncrements and
// WithFencingAcquisitions).
const (
	shortIncrements, longIncrements = 50, 200
	shortFencing, longFencing       = 500, 2000
)

// RunOption adjusts a Run.
type RunOption func(*runConfig)

type runConfig struct {
	full       bool
	strategies []Strategy
	sizes      []int
	increments int
	fencing    int
	leakGrace  time.Duration
}

// WithFullMatrix runs the Locker, MultiKey and Shared groups over every
// strategy and size of the matrix (Strategies and Sizes, or WithStrategies
// and WithSizes), and MutualExclusion under each greedy strategy, instead
// of the driver scope's one point: for checking strategies and core over
// real servers, which the project does on memory and on go-redis's single
// servers.
func WithFullMatrix() RunOption {
	return func(c *runConfig) { c.full = true }
}

// WithStrategies sets the strategies of the full matrix (WithFullMatrix).
func WithStrategies(s ...Strategy) RunOption {
	return func(c *runConfig) { c.strategies = s }
}

// WithSizes sets the node counts of the full matrix (WithFullMatrix).
func WithSizes(n ...int) RunOption {
	return func(c *runConfig) { c.sizes = n }
}

// WithIncrements sets how many increments each of the 32 goroutines of the
// MutualExclusion group makes. Default: 50, or 200 under QUORUMLOCK_LONG=1.
func WithIncrements(n int) RunOption {
	return func(c *runConfig) { c.increments = n }
}

// WithFencingAcquisitions sets how many fenced acquisitions the 16
// goroutines of Fencing/StrictlyIncreasing make in all. Default: 500, or
// 2000 under QUORUMLOCK_LONG=1.
func WithFencingAcquisitions(n int) RunOption {
	return func(c *runConfig) { c.fencing = n }
}

// WithLeakGrace gives goroutines up to d to end after the harness is
// closed, before the leak check fails the run: for a driver whose clients
// finish closing in the background after Close returns. Goroutines still
// running after d are leaks.
// Default: 3 s, enough for go-redis, whose pools probe a dead server once a
// second until they are closed.
func WithLeakGrace(d time.Duration) RunOption {
	return func(c *runConfig) { c.leakGrace = d }
}

// Run runs the whole suite against the backend of newHarness:
//
//   - NodeContract: each protocol operation of one node, directly;
//   - Locker/N=<n>/<strategy>: the locker properties over n nodes, at
//     N=3 with parallel, or over the whole matrix (WithFullMatrix);
//   - MultiKey/N=<n>/<strategy> and Shared/N=<n>/<strategy>: multi-key
//     and shared (read) locks over n nodes, at N=3 with parallel or over
//     the whole matrix, as Locker; and once, each kind kept alive and
//     lost at the next extension;
//   - MutualExclusion/<strategy>: 32 goroutines incrementing a counter held
//     on a server under the lock, which must end exact; under parallel, or
//     each greedy strategy of the matrix;
//   - Lifecycle: keep-alive, the notice of a lock's end (Done, Err,
//     Context, Do) on outages, deleted keys and release, and the wake of a
//     waiter on release;
//   - RestartGuard: the restart guard's script on the server's clock, and
//     a Locker over servers restarted empty, with their data, and adopted
//     (for sharded nodes: that the guard leaves them out);
//   - Fencing: tokens strictly increasing across many Lockers while
//     servers restart with their data, and per key over clusters;
//   - NodeHealth (not for Redis Clusters, which are never suspect): a hung
//     node costs one node timeout, then none until it answers again; a
//     release to a suspect node follows the SET it undoes; releases to a
//     node that has just hung reach it once it answers; after two of
//     three servers hung beyond a TTL, no key of a failed round outlives
//     their first answer; a waiter gets the lock handed over with the
//     herald dead or hung;
//   - Cluster: when the harness's servers are Redis Clusters
//     (ClusterServers), keys over every master, one slot per lock, and a
//     master killed mid-run.
//
// The package doc's Scope says why one point of the strategy × size
// matrix is the default. QUORUMLOCK_LONG=1 runs the full matrix and the
// long forms of MutualExclusion and Fencing.
//
// It checks for leaked goroutines after the harness is closed, so call it
// from a top-level test that does not run in parallel with others.
func Run(t *testing.T, newHarness HarnessMaker, opts ...RunOption) {
	h, cfg := begin(t, newHarness, opts)

	// The parallel groups start once this function returns; the serial
	// MutualExclusion group runs first, alone, because contention tests
	// that share the CPU slow each other's rounds into more split votes.
	t.Run("NodeContract", func(t *testing.T) {
		t.Parallel()
		runNodeContract(t, h)
	})
	t.Run("RestartGuard", func(t *testing.T) {
		t.Parallel()
		runRestartGuard(t, h)
	})
	if _, ok := h.Shared(t, 1).(ClusterServers); ok {
		t.Run("Cluster", func(t *testing.T) {
			t.Parallel()
			runCluster(t, h)
		})
	}
	t.Run("Lifecycle", func(t *testing.T) {
		t.Parallel()
		runLifecycle(t, h)
	})
	if _, cluster := h.Shared(t, 1).(ClusterServers); !cluster {
		// A Redis Cluster node is never suspect: a master down says
		// nothing of the keys on the others (docs/design.md, node health).
		t.Run("NodeHealth", func(t *testing.T) {
			t.Parallel()
			runNodeHealth(t, h)
		})
	}
	t.Run("Fencing", func(t *testing.T) {
		t.Parallel()
		runFencing(t, h, cfg)
	})
	runLockKinds(t, h, cfg)
	t.Run("MutualExclusion", func(t *testing.T) {
		for _, s := range cfg.strategies {
			if strings.HasSuffix(s.Name, "-stop") {
				continue // same round logic as the greedy mode; keeps the run short
			}
			t.Run(s.Name, func(t *testing.T) { mutualExclusion(t, h, s, 32, cfg.increments) })
		}
	})
}

// runLockKinds runs, in parallel, the Locker group (the plain lock's
// properties at each point of cfg's matrix) and the MultiKey, Shared and
// Election groups of the other lock kinds, and the Semaphore group.
func runLockKinds(t *testing.T, h Harness, cfg runConfig) {
	t.Run("Locker", func(t *testing.T) {
		t.Parallel()
		runMatrix(t, h, cfg, runLockerProperties)
	})
	t.Run("MultiKey", func(t *testing.T) {
		t.Parallel()
		runKind(t, h, cfg, runMultiKey, kindSet, "DeletedKeyLostAtNextExtension")
	})
	t.Run("Shared", func(t *testing.T) {
		t.Parallel()
		runKind(t, h, cfg, runShared, kindReader, "DeletedReaderLostAtNextExtension")
	})
	t.Run("Semaphore", func(t *testing.T) {
		t.Parallel()
		runKind(t, h, cfg, runSemaphore, kindPermit, "DeletedSlotLostAtNextExtension")
	})
	t.Run("Election", func(t *testing.T) {
		t.Parallel()
		runElectionKind(t, h, cfg)
	})
}

// lockOf is the lock a kind's life checks take (takeKind).
type lockOf uint8

const (
	kindSet    lockOf = iota // a multi-key lock of two keys
	kindReader               // a shared (read) lock
	kindPermit               // a permit of a semaphore of one
)

// kindCheck is one check of a lock kind at a point of the matrix; a
// greedy one runs, under the full matrix, only with the greedy
// strategies, as MutualExclusion does (the stop-at-quorum modes add
// nothing to a contention check but time).
type kindCheck struct {
	name   string
	fn     func(*testing.T, Harness, int, Strategy)
	greedy bool
}

// runKindChecks runs checks in parallel at the point n, s of the matrix.
func runKindChecks(t *testing.T, h Harness, n int, s Strategy, checks []kindCheck) {
	for _, c := range checks {
		if c.greedy && strings.HasSuffix(s.Name, "-stop") {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, h, n, s)
		})
	}
}

// runKind runs the checks of a lock kind: those of matrix at each point
// of cfg's matrix (N=<n>/<strategy>), and its life after acquisition once,
// as Lifecycle does a plain lock's, since that is not about strategies:
// kept alive, and lost at the next extension (the check named lost) once
// a key (a set's, a permit's slot) or its entry (a reader's) is gone
// from a majority.
func runKind(t *testing.T, h Harness, cfg runConfig, matrix func(*testing.T, Harness, int, Strategy), shared lockOf, lost string) {
	runMatrix(t, h, cfg, matrix)
	t.Run("KeptAliveSurvives", func(t *testing.T) {
		t.Parallel()
		keysKeptAlive(t, h, shared)
	})
	t.Run(lost, func(t *testing.T) {
		t.Parallel()
		keysLost(t, h, shared)
	})
}

// runMatrix runs check at each point of cfg's matrix, as the parallel
// subtest N=<n>/<strategy>.
func runMatrix(t *testing.T, h Harness, cfg runConfig, check func(*testing.T, Harness, int, Strategy)) {
	for _, n := range cfg.sizes {
		for _, s := range cfg.strategies {
			t.Run(fmt.Sprintf("N=%d/%s", n, s.Name), func(t *testing.T) {
				t.Parallel()
				check(t, h, n, s)
			})
		}
	}
}

// begin starts a run: it applies opts, makes the harness, and arranges for
// it to be closed and for goroutines left behind to fail the run.
func begin(t *testing.T, newHarness HarnessMaker, opts []RunOption) (Harness, runConfig) {
	cfg := newConfig(t, opts)
	requireNoSkipUnderCI(t)
	ignore := goleak.IgnoreCurrent()
	h := newHarness(t)
	require.NotNil(t, h, "conformance: the harness maker returned nil")
	t.Cleanup(func() {
		assert.NoError(t, h.Close(), "closing the harness")
		if err := FindLeaks(cfg.leakGrace, ignore); err != nil {
			t.Error(err)
		}
	})
	return h, cfg
}

// newConfig applies opts over the defaults of the scope and run length
// that QUORUMLOCK_LONG asks for, and narrows the matrix to the driver
// scope's one point unless the run is full.
func newConfig(t *testing.T, opts []RunOption) runConfig {
	cfg := runConfig{strategies: Strategies(), sizes: Sizes, increments: shortIncrements, fencing: shortFencing, leakGrace: LeakGrace}
	if long(t) {
		cfg.full, cfg.increments, cfg.fencing = true, longIncrements, longFencing
	}
	for _, o := range opts {
		o(&cfg)
	}
	if !cfg.full {
		cfg.strategies, cfg.sizes = []Strategy{parallel}, []int{driverSize}
	}
	return cfg
}

// long reports whether QUORUMLOCK_LONG asks for the long run; a value
// that is not a boolean fails the test rather than choosing for it.
func long(t *testing.T) bool {
	v := os.Getenv(LongEnv)
	if v == "" {
		return false
	}
	on, err := strconv.ParseBool(v)
	require.NoError(t, err, "conformance: %s=%q: want 1 or 0", LongEnv, v)
	return on
}

// requireNoSkipUnderCI turns skips into failures when CI is set: a missing
// server must not pass as a green run.
func requireNoSkipUnderCI(t *testing.T) {
	if os.Getenv("CI") == "" {
		return
	}
	t.Cleanup(func() {
		if t.Skipped() {
			t.Errorf("conformance: the suite was skipped under CI=true")
		}
	})
}

// key returns a key unique to the calling test.
func key(t *testing.T) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "ql-conformance:" + t.Name() + ":" + hex.EncodeToString(b[:])
}

// Test defaults: node timeouts generous enough for a loaded CI machine
// running the race detector, and short retry delays.
const (
	testNodeTimeout = 500 * time.Millisecond
	testRetryMin    = 2 * time.Millisecond
	testRetryMax    = 10 * time.Millisecond
)

// newLocker makes a Locker for a test and closes it when the test ends.
func newLocker(t *testing.T, nodes []core.Node, s Strategy, opts ...core.Option) *core.Locker {
	t.Helper()
	all := append([]core.Option{
		core.WithStrategy(s.New()),
		core.WithNodeTimeout(testNodeTimeout),
		core.WithRetryDelay(strategies.JitterDelay(testRetryMin, testRetryMax)),
	}, opts...)
	l, err := core.New(nodes, all...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.Close()) })
	return l
}

// valuesOf reads key on every server: its value, or "" where absent.
func valuesOf(t *testing.T, s Servers, key string) []string {
	t.Helper()
	out := make([]string, s.Len())
	for i := range out {
		v, _, ok, err := s.Get(context.Background(), i, key)
		require.NoError(t, err, "reading server %d", i)
		if ok {
			out[i] = v
		}
	}
	return out
}

// repeat returns n copies of v.
func repeat[T any](v T, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v
	}
	return out
}
