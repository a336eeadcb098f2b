package strategies_test

// FuzzTally runs every built-in strategy over fuzzed rounds (node count,
// quorum, which nodes vote yes, per-attempt timeout, which attempt cancels
// the caller's context) and checks what package strategies promises of
// Run: it returns, waits for the attempts it started, tries each node at
// most once, reports exactly what the attempts said, and stops only where
// its mode allows.

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/strategies"
)

type fuzzStrategy struct {
	name         string
	s            strategies.Strategy
	concurrent   bool
	failFast     bool
	stopAtQuorum bool
}

func fuzzStrategies() []fuzzStrategy {
	saq := strategies.WithStopAtQuorum(true)
	return []fuzzStrategy{
		{"Sequential", strategies.Sequential(), false, false, false},
		{"Sequential/WithStopAtQuorum", strategies.Sequential(saq), false, false, true},
		{"Parallel", strategies.Parallel(), true, false, false},
		{"Parallel/WithStopAtQuorum", strategies.Parallel(saq), true, false, true},
		{"FailFast", strategies.FailFast(), true, true, false},
		{"FailFast/WithStopAtQuorum", strategies.FailFast(saq), true, true, true},
	}
}

// The bits of FuzzTally's flags argument.
const (
	flagTimeout   = 1 << iota // Round.Timeout is an hour rather than none
	flagCancelled             // Run gets an already-cancelled context
)

// fuzzRunLimit is how long one Run may take before it counts as a hang;
// no attempt here blocks.
const fuzzRunLimit = 10 * time.Second

func FuzzTally(f *testing.F) {
	// nodes, quorum pick, yes mask, yield mask, flags, cancel at
	f.Add(uint8(1), uint8(0), uint16(1), uint16(0), uint8(0), uint8(255))
	f.Add(uint8(1), uint8(0), uint16(0), uint16(0), uint8(0), uint8(255))
	f.Add(uint8(3), uint8(0), uint16(0b111), uint16(0), uint8(0), uint8(255))
	f.Add(uint8(3), uint8(0), uint16(0b011), uint16(0b101), uint8(flagTimeout), uint8(255))
	f.Add(uint8(3), uint8(1), uint16(0b110), uint16(0), uint8(0), uint8(255))
	f.Add(uint8(5), uint8(0), uint16(0b00111), uint16(0b11111), uint8(0), uint8(255))
	f.Add(uint8(5), uint8(2), uint16(0b01110), uint16(0), uint8(flagTimeout), uint8(255))
	f.Add(uint8(5), uint8(0), uint16(0), uint16(0), uint8(0), uint8(255))
	f.Add(uint8(9), uint8(0), uint16(0b101010101), uint16(0b010101010), uint8(flagTimeout), uint8(255))
	f.Add(uint8(9), uint8(4), uint16(0b111111111), uint16(0), uint8(0), uint8(255))
	f.Add(uint8(4), uint8(0), uint16(0b1111), uint16(0), uint8(flagCancelled), uint8(255))
	f.Add(uint8(4), uint8(1), uint16(0b1011), uint16(0), uint8(0), uint8(1))
	f.Add(uint8(7), uint8(0), uint16(0b1110001), uint16(0b11), uint8(flagTimeout), uint8(0))
	f.Fuzz(func(t *testing.T, nodes, qpick uint8, yesMask, yieldMask uint16, flags, cancelAt uint8) {
		n := 1 + int(nodes)%9
		quorum := n/2 + 1 + int(qpick)%(n-n/2)
		yes := func(i int) bool { return yesMask>>i&1 == 1 }
		var timeout time.Duration
		if flags&flagTimeout != 0 {
			timeout = time.Hour
		}
		for _, fs := range fuzzStrategies() {
			checkTally(t, fs, n, quorum, yes, func(i int) bool { return yieldMask>>i&1 == 1 }, timeout, flags&flagCancelled != 0, int(cancelAt))
		}
	})
}

func checkTally(t *testing.T, fs fuzzStrategy, n, quorum int, yes, yield func(int) bool, timeout time.Duration, cancelled bool, cancelAt int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if cancelled {
		cancel()
	}
	calls := make([]atomic.Int32, n)
	var running, afterReturn atomic.Int32
	var returned atomic.Bool
	var order []int // Sequential only: the nodes in the order they were tried
	r := strategies.Round{
		Nodes:   n,
		Quorum:  quorum,
		Timeout: timeout,
		Attempt: func(actx context.Context, i int) bool {
			if returned.Load() {
				afterReturn.Add(1)
			}
			running.Add(1)
			defer running.Add(-1)
			calls[i].Add(1)
			if !fs.concurrent {
				order = append(order, i)
			}
			if dl, ok := actx.Deadline(); timeout > 0 && (!ok || time.Until(dl) > timeout) {
				t.Errorf("%s: node %d: attempt context deadline %v (set %t), want within %v", fs.name, i, dl, ok, timeout)
			}
			if yield(i) {
				runtime.Gosched()
			}
			if i == cancelAt {
				cancel()
			}
			return yes(i)
		},
	}
	results := make([]strategies.Result, n)
	done := make(chan struct{})
	go func() {
		defer close(done)
		fs.s.Run(ctx, r, results)
		returned.Store(true)
	}()
	timer := time.NewTimer(fuzzRunLimit)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		t.Fatalf("%s: Run(N=%d, quorum=%d) did not return within %v", fs.name, n, quorum, fuzzRunLimit)
	}
	if k := running.Load(); k != 0 {
		t.Fatalf("%s: Run returned with %d attempts still running", fs.name, k)
	}
	if a := afterReturn.Load(); a != 0 {
		t.Fatalf("%s: %d attempts started after Run returned", fs.name, a)
	}

	where := func() string {
		return fmt.Sprintf("%s: N=%d quorum=%d results=%v", fs.name, n, quorum, results)
	}
	won, lost := 0, 0
	for i, res := range results {
		c := calls[i].Load()
		if c > 1 {
			t.Fatalf("%s: node %d attempted %d times", where(), i, c)
		}
		switch res {
		case strategies.NotTried:
			if c != 0 {
				t.Fatalf("%s: node %d attempted but reported not-tried", where(), i)
			}
		case strategies.Won:
			if c != 1 || !yes(i) {
				t.Fatalf("%s: node %d reported won, attempted %d times, voted yes %t", where(), i, c, yes(i))
			}
			won++
		case strategies.Lost:
			if c != 1 || yes(i) {
				t.Fatalf("%s: node %d reported lost, attempted %d times, voted yes %t", where(), i, c, yes(i))
			}
			lost++
		default:
			t.Fatalf("%s: node %d has result %v", where(), i, res)
		}
	}
	cw, cl, cn := strategies.Count(results)
	if cw != won || cl != lost || cn != n-won-lost || cw+cl+cn != n {
		t.Fatalf("%s: Count = (%d, %d, %d), want (%d, %d, %d)", where(), cw, cl, cn, won, lost, n-won-lost)
	}
	tried := won + lost

	if cancelled {
		if tried != 0 {
			t.Fatalf("%s: %d attempts ran under an already-cancelled context", where(), tried)
		}
		return
	}
	// The caller's context ended when node cancelAt's attempt ran (if it
	// did): attempts may stop from then on.
	callerCut := cancelAt < n && calls[cancelAt].Load() == 1
	if !fs.concurrent {
		// In index order, without gaps.
		for i, node := range order {
			if node != i {
				t.Fatalf("%s: Sequential tried node %d in place %d (order %v)", where(), node, i, order)
			}
		}
		stop := tried
		switch {
		case fs.stopAtQuorum && won > quorum:
			t.Fatalf("%s: WithStopAtQuorum went on after the quorum-th vote", where())
		case tried == n:
		case fs.stopAtQuorum && won == quorum && yes(tried-1):
			// Stopped right after the quorum-th vote.
		case callerCut && stop == cancelAt+1:
			// Stopped right after the caller's context ended.
		default:
			t.Fatalf("%s: stopped after %d of %d nodes", where(), tried, n)
		}
		return
	}
	if tried == n {
		return
	}
	// A concurrent strategy leaves nodes untried only when the round ended:
	// by the caller, at quorum (WithStopAtQuorum), or once quorum became
	// impossible (FailFast). Attempts that ran before the end count as
	// they answered, so Won may exceed the quorum.
	switch {
	case callerCut:
	case fs.stopAtQuorum && won >= quorum:
	case fs.failFast && lost >= n-quorum+1:
	default:
		t.Fatalf("%s: left %d nodes untried without reason", where(), n-tried)
	}
}
