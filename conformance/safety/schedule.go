package safety

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// FaultKind names a kind of fault the schedule injects.
type FaultKind string

// The fault kinds. Every node fault hits a minority: at most N - quorum
// nodes are faulty at any moment, so a quorum stays possible and every
// lock that is granted must be safe.
const (
	// KillRestart kills a node (SIGKILL) and restarts it empty, without
	// persistence, after more than the TTL, as the Redlock specification
	// requires of operators.
	KillRestart FaultKind = "kill-restart"
	// Pause stops a node with SIGSTOP and resumes it with SIGCONT: it keeps
	// its connections and answers nothing meanwhile.
	Pause FaultKind = "pause"
	// Latency adds a delay above the node timeout, with jitter, to every
	// round trip through the node's proxy.
	Latency FaultKind = "latency"
	// Partition black-holes the node's proxy: nothing passes, nothing is
	// closed.
	Partition FaultKind = "partition"
	// Reset closes every connection to the node at once.
	Reset FaultKind = "reset"
	// Bandwidth limits the node's replies to a few kilobytes a second.
	Bandwidth FaultKind = "bandwidth"
	// Down disables the node's proxy: its connections are closed and new
	// ones refused, while the server runs on.
	Down FaultKind = "down"
	// Ring is the majorities ring, the partition a quorum finds hardest:
	// each client reaches a different majority of the nodes (client c
	// nodes c, c+1, ..., c+quorum-1 mod N; see RingReach) through its own
	// proxies. Every node is cut off from some clients, so no node fault
	// overlaps it.
	Ring FaultKind = "majorities-ring"
	// ClientPause stalls a client right after it acquires, past the lock's
	// validity (a GC pause, swap): it must find out before it uses the
	// resource.
	ClientPause FaultKind = "client-pause"
)

// AllFaults are every fault kind, in a fixed order.
var AllFaults = []FaultKind{KillRestart, Pause, Latency, Partition, Reset, Bandwidth, Down, Ring, ClientPause}

// Fault is one scheduled fault: at At after the run starts, Kind hits
// Target (a node, a client for ClientPause, none for Ring) for Duration
// (for Latency, Delay ± Jitter per round trip; for Bandwidth, Rate
// kilobytes a second).
type Fault struct {
	At       time.Duration
	Kind     FaultKind
	Target   int
	Duration time.Duration
	Delay    time.Duration
	Jitter   time.Duration
	Rate     int
}

func (f Fault) String() string {
	who := fmt.Sprintf("node %d", f.Target)
	switch f.Kind {
	case ClientPause:
		who = fmt.Sprintf("client %d", f.Target)
	case Ring:
		who = "every client"
	}
	s := fmt.Sprintf("%8v %-12s %s for %v", f.At.Round(time.Millisecond), f.Kind, who, f.Duration.Round(time.Millisecond))
	if f.Kind == Latency {
		s += fmt.Sprintf(" (%v ± %v)", f.Delay, f.Jitter)
	}
	if f.Kind == Bandwidth {
		s += fmt.Sprintf(" (%d KB/s)", f.Rate)
	}
	return s
}

// ScheduleConfig is what a schedule depends on.
type ScheduleConfig struct {
	Seed        int64
	Duration    time.Duration // faults start within it
	Nodes       int
	Clients     int
	MaxFaulty   int // nodes faulty at once
	TTL         time.Duration
	NodeTimeout time.Duration
	Kinds       []FaultKind // default AllFaults
}

// restartSlack is how long a node killed by KillRestart counts as faulty
// after its restart is due: the restart itself, and the connections that
// clients must make again.
const restartSlack = 1500 * time.Millisecond

// Schedule draws the faults of a run from cfg.Seed: the same seed, the
// same faults at the same offsets. The first faults are one of each kind,
// in a random order, so that every run injects every kind; then kinds are
// drawn at random, one every 100-400 ms, each on a node that is not
// already faulty while at most MaxFaulty nodes are. A Ring starts only
// when no node is faulty, and no node fault starts until it has ended.
func Schedule(cfg ScheduleConfig) []Fault {
	kinds := cfg.Kinds
	if len(kinds) == 0 {
		kinds = AllFaults
	}
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5afe7e57))
	between := func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(rng.Int64N(int64(hi-lo)))
	}
	busyUntil := make([]time.Duration, cfg.Nodes)
	// first queues one of each kind, in a random order; a kind that finds
	// no free node goes back to the end of the queue.
	var first []FaultKind
	for _, i := range rng.Perm(len(kinds)) {
		first = append(first, kinds[i])
	}
	var out []Fault
	for at := between(100*time.Millisecond, 300*time.Millisecond); at < cfg.Duration; at += between(100*time.Millisecond, 400*time.Millisecond) {
		kind := kinds[rng.IntN(len(kinds))]
		queued := len(first) > 0
		if queued {
			kind, first = first[0], first[1:]
		}
		f := Fault{At: at, Kind: kind}
		switch kind {
		case ClientPause:
			f.Target = rng.IntN(cfg.Clients)
			f.Duration = cfg.TTL + between(100*time.Millisecond, 500*time.Millisecond)
			out = append(out, f)
			continue
		case KillRestart:
			f.Duration = cfg.TTL + between(200*time.Millisecond, 600*time.Millisecond)
		case Pause:
			f.Duration = between(100*time.Millisecond, cfg.TTL*3/2)
		case Latency:
			f.Duration = between(200*time.Millisecond, time.Second)
			f.Delay = between(cfg.NodeTimeout*3/2, cfg.NodeTimeout*4)
			f.Jitter = cfg.NodeTimeout / 2
		case Partition, Down, Ring:
			f.Duration = between(200*time.Millisecond, cfg.TTL*3/2)
		case Bandwidth:
			f.Duration = between(200*time.Millisecond, time.Second)
			f.Rate = 1 + rng.IntN(4)
		case Reset:
			f.Duration = 0
		}
		// A node free now, while fewer than MaxFaulty are busy.
		var free []int
		faulty := 0
		for n, until := range busyUntil {
			if until > at {
				faulty++
			} else {
				free = append(free, n)
			}
		}
		if faulty >= cfg.MaxFaulty || len(free) == 0 || (kind == Ring && faulty > 0) {
			if queued {
				first = append(first, kind)
			}
			continue
		}
		if kind == Ring {
			for n := range busyUntil {
				busyUntil[n] = at + f.Duration + 100*time.Millisecond
			}
			out = append(out, f)
			continue
		}
		f.Target = free[rng.IntN(len(free))]
		busyUntil[f.Target] = at + f.Duration + 100*time.Millisecond
		if kind == KillRestart {
			busyUntil[f.Target] += restartSlack
		}
		out = append(out, f)
	}
	return out
}
