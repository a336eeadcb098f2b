package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// statusCommand is `quorumlock status`.
func statusCommand(args []string, stdout, stderr io.Writer) int {
	s, pos, _, err := parse("status", args)
	if code, done := parsed(err, "status", stdout, stderr); done {
		return code
	}
	if len(pos) != 1 {
		return usageFailure(stderr, "status", errors.New("want one KEY"))
	}
	w := wanted{keys: pos, permits: s.permits}
	locker, err := newLocker(s.cfg)
	if err != nil {
		return failure(stderr, "status", w, &s, err)
	}
	defer closeSoon(locker)
	if s.permits > 0 {
		return permitsStatus(locker, w, &s, stdout, stderr)
	}
	st, err := locker.Inspect(context.Background(), pos[0])
	if err != nil {
		return failure(stderr, "status", w, &s, err)
	}
	// Only a held key may have a leader: a free or shared key costs no
	// second read. Leader refuses a key that a lock of another kind holds,
	// as invalid for an election: such a key has no leader.
	var leader core.Leader
	if value, _, _ := st.Holder(); st.Held() && value != driver.SharedValue {
		leader, err = locker.Leader(context.Background(), pos[0])
		if err != nil && !errors.Is(err, core.ErrInvalidArgument) {
			return failure(stderr, "status", w, &s, err)
		}
	}
	printState(stdout, st, leader, s.value)
	if st.Held() {
		return exitOK
	}
	return exitFree
}

// permitsStatus is `quorumlock status -n K KEY`: how many of the K
// permits are in use, then each permit's slot as status prints a key,
// indented. It exits 0 when every permit is in use, 1 when one is free.
func permitsStatus(locker *core.Locker, w wanted, s *settings, stdout, stderr io.Writer) int {
	states, err := locker.InspectPermits(context.Background(), w.keys[0], w.permits)
	if err != nil {
		return failure(stderr, "status", w, s, err)
	}
	used := 0
	for _, st := range states {
		if st.Held() {
			used++
		}
	}
	fmt.Fprintf(stdout, "%s: %d of %d permits in use\n", w.keys[0], used, w.permits)
	for _, st := range states {
		var b strings.Builder
		printState(&b, st, core.Leader{}, s.value)
		for line := range strings.Lines(b.String()) {
			fmt.Fprint(stdout, "  "+line)
		}
	}
	if used == w.permits {
		return exitOK
	}
	return exitFree
}

// printState writes a summary line (naming the leader, when one holds the
// key), then one line per node, then, when readers hold the key (a shared
// lock), one line per reader.
func printState(w io.Writer, st *core.KeyState, leader core.Leader, showValue bool) {
	value, on, ttl := st.Holder()
	readers := readersOf(st)
	switch {
	case st.Held() && leader.Term != 0:
		fmt.Fprintf(w, "%s: led by %s (term %d) on %d of %d nodes (quorum %d), %s\n",
			st.Key, leader.Value, leader.Term, on, len(st.Nodes), st.Quorum, leftText(ttl))
	case st.Held() && value == driver.SharedValue:
		fmt.Fprintf(w, "%s: held by %s on %d of %d nodes (quorum %d), %s\n",
			st.Key, readerCount(heldCount(readers)), on, len(st.Nodes), st.Quorum, leftText(ttl))
	case st.Held():
		fmt.Fprintf(w, "%s: held on %d of %d nodes (quorum %d), %s\n", st.Key, on, len(st.Nodes), st.Quorum, leftText(ttl))
	case on > 0:
		fmt.Fprintf(w, "%s: free (a value is left on %d of %d nodes, quorum %d; %s)\n", st.Key, on, len(st.Nodes), st.Quorum, leftText(ttl))
	default:
		fmt.Fprintf(w, "%s: free\n", st.Key)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, n := range st.Nodes {
		fmt.Fprintf(tw, "  %s\t%s\n", n.Node, nodeText(n, value, showValue))
	}
	if len(readers) > 0 {
		fmt.Fprintf(tw, "  readers:\n")
	}
	for i, r := range readers {
		name := fmt.Sprintf("reader %d", i+1)
		if showValue {
			name = r.value
		}
		fmt.Fprintf(tw, "    %s\t%s\n", name, r.text(len(st.Nodes)))
	}
	_ = tw.Flush()
}

func nodeText(n core.NodeState, holder string, showValue bool) string {
	var b strings.Builder
	switch {
	case n.Outcome != core.OutcomeOK:
		fmt.Fprintf(&b, "no answer\t%s", unprefixed(n.Err.Error()))
		return b.String()
	case n.Value == "":
		return "free"
	case n.Value == driver.SharedValue:
		fmt.Fprintf(&b, "shared\t%s\t%s", ttlText(n.TTL), readerCount(len(n.Readers)))
	case n.Value == holder:
		fmt.Fprintf(&b, "held\t%s", ttlText(n.TTL))
	default:
		fmt.Fprintf(&b, "other value\t%s", ttlText(n.TTL))
	}
	if showValue {
		fmt.Fprintf(&b, "\t%s", n.Value)
	}
	return b.String()
}

// reader is one shared lock's state across the nodes.
type reader struct {
	value string        // the reader's value, a secret
	on    int           // how many nodes list it
	held  bool          // on a quorum
	left  time.Duration // as KeyState.Holder's TTL
}

func (r reader) text(nodes int) string {
	if r.held {
		return fmt.Sprintf("on %d of %d nodes\t%s", r.on, nodes, leftText(r.left))
	}
	return fmt.Sprintf("on %d of %d nodes, not a quorum\t%s", r.on, nodes, leftText(r.left))
}

// readersOf lists the readers that any node lists under st's key, those
// that hold it longest first. Each is judged as a lock is (KeyState.Holder):
// held while a quorum lists it.
func readersOf(st *core.KeyState) []reader {
	var readers []reader
	seen := make(map[string]bool)
	for _, n := range st.Nodes {
		for v := range n.Readers {
			if seen[v] {
				continue
			}
			seen[v] = true
			one := core.KeyState{Quorum: st.Quorum, Nodes: make([]core.NodeState, len(st.Nodes))}
			for i, m := range st.Nodes {
				one.Nodes[i].NodeResult = m.NodeResult
				if ttl, ok := m.Readers[v]; ok {
					one.Nodes[i].Value, one.Nodes[i].TTL = v, ttl
				}
			}
			_, on, left := one.Holder()
			readers = append(readers, reader{value: v, on: on, held: one.Held(), left: left})
		}
	}
	slices.SortFunc(readers, func(a, b reader) int {
		if a.held != b.held {
			if a.held {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(b.left, a.left), strings.Compare(a.value, b.value))
	})
	return readers
}

// readerCount says "1 reader" or "n readers".
func readerCount(n int) string {
	if n == 1 {
		return "1 reader"
	}
	return fmt.Sprintf("%d readers", n)
}

// heldCount is how many of readers hold the key.
func heldCount(readers []reader) int {
	n := 0
	for _, r := range readers {
		if r.held {
			n++
		}
	}
	return n
}

// leftText says how long a value stays.
func leftText(d time.Duration) string {
	if d < 0 {
		return "without expiry"
	}
	return ttlText(d) + " left"
}

func ttlText(d time.Duration) string {
	if d < 0 {
		return "no expiry"
	}
	return d.Round(time.Millisecond).String()
}
