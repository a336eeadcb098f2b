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
	s := &scheduler{cfg: cfg, rng: rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5afe7e57)), busyUntil: make([]time.Duration, cfg.Nodes)}
	// first queues one of each kind, in a random order; a kind that finds
	// no free node goes back to the end of the queue.
	var first []FaultKind
	for _, i := range s.rng.Perm(len(kinds)) {
		first = append(first, kinds[i])
	}
	var out []Fault
	for at := s.between(100*time.Millisecond, 300*time.Millisecond); at < cfg.Duration; at += s.between(100*time.Millisecond, 400*time.Millisecond) {
		kind := kinds[s.rng.IntN(len(kinds))]
		queued := len(first) > 0
		if queued {
			kind, first = first[0], first[1:]
		}
		f := s.shape(Fault{At: at, Kind: kind})
		if kind != ClientPause {
			var ok bool
			if f, ok = s.place(f); !ok {
				if queued {
					first = append(first, kind)
				}
				continue
			}
		}
		out = append(out, f)
	}
	return out
}

// scheduler draws a schedule's faults, in an order of draws from rng that
// a seed fixes.
type scheduler struct {
	cfg       ScheduleConfig
	rng       *rand.Rand
	busyUntil []time.Duration // per node: when it stops counting as faulty
}

// between draws a duration from lo up to hi; lo when hi is not above it.
func (s *scheduler) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(s.rng.Int64N(int64(hi-lo)))
}

// shape draws f's length and the parameters of its kind; for ClientPause
// also its client, past the TTL.
func (s *scheduler) shape(f Fault) Fault {
	ttl, timeout := s.cfg.TTL, s.cfg.NodeTimeout
	switch f.Kind {
	case ClientPause:
		f.Target = s.rng.IntN(s.cfg.Clients)
		f.Duration = ttl + s.between(100*time.Millisecond, 500*time.Millisecond)
	case KillRestart:
		f.Duration = ttl + s.between(200*time.Millisecond, 600*time.Millisecond)
	case Pause:
		f.Duration = s.between(100*time.Millisecond, ttl*3/2)
	case Latency:
		f.Duration = s.between(200*time.Millisecond, time.Second)
		f.Delay = s.between(timeout*3/2, timeout*4)
		f.Jitter = timeout / 2
	case Partition, Down, Ring:
		f.Duration = s.between(200*time.Millisecond, ttl*3/2)
	case Bandwidth:
		f.Duration = s.between(200*time.Millisecond, time.Second)
		f.Rate = 1 + s.rng.IntN(4)
	case Reset:
		f.Duration = 0
	}
	return f
}

// place puts a node fault on a node free at f.At, drawn at random, and
// marks it faulty until f ends, with a margin (and restartSlack after a
// KillRestart); a Ring marks every node. It reports false, placing
// nothing, when MaxFaulty nodes are faulty or none is free, or, for a
// Ring, when any is faulty.
func (s *scheduler) place(f Fault) (Fault, bool) {
	var free []int
	faulty := 0
	for n, until := range s.busyUntil {
		if until > f.At {
			faulty++
		} else {
			free = append(free, n)
		}
	}
	if faulty >= s.cfg.MaxFaulty || len(free) == 0 || (f.Kind == Ring && faulty > 0) {
		return f, false
	}
	if f.Kind == Ring {
		for n := range s.busyUntil {
			s.busyUntil[n] = f.At + f.Duration + 100*time.Millisecond
		}
		return f, true
	}
	f.Target = free[s.rng.IntN(len(free))]
	s.busyUntil[f.Target] = f.At + f.Duration + 100*time.Millisecond
	if f.Kind == KillRestart {
		s.busyUntil[f.Target] += restartSlack
	}
	return f, true
}
