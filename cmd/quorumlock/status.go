package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/quorumlock/quorumlock/core"
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
	locker, err := newLocker(s.cfg)
	if err != nil {
		return failure(stderr, "status", pos[0], &s, err)
	}
	defer closeSoon(locker)
	st, err := locker.Inspect(context.Background(), pos[0])
	if err != nil {
		return failure(stderr, "status", pos[0], &s, err)
	}
	printState(stdout, st, s.value)
	if st.Held() {
		return exitOK
	}
	return exitFree
}

// printState writes a summary line, then one line per node.
func printState(w io.Writer, st *core.KeyState, showValue bool) {
	value, on, ttl := st.Holder()
	switch {
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
