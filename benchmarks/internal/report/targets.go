package report

import (
	"fmt"
	"io"
	"math"
	"time"
)

// target is one goal quorumlock sets itself: a metric of system in mode,
// divided by the same metric of against when against is set, compared with
// goal.
type target struct {
	mode    string
	metric  string
	value   func(Record) (float64, bool)
	system  string
	against string
	atMost  bool // the goal is an upper bound
	goal    float64
	fmt     func(float64) string
}

const qlRueidis = "quorumlock-rueidis-parallel"

var (
	opsPerSec = throughputColumns[0].value
	allocs    = throughputColumns[3].value
	acqPerSec = contentionColumns[0].value
	handoff50 = contentionColumns[1].value
	waitP99   = contentionColumns[4].value
	releaser  = contentionColumns[6].value
)

func ratio(v float64) string { return fmt.Sprintf("%.2f", v) }

// targets lists the goals, in the order they are printed.
func targets() []target {
	list := []target{
		{mode: Uncontended, metric: "ops/s", value: opsPerSec, system: qlRueidis, against: "floor-rueidis", goal: 0.95},
		{mode: Uncontended, metric: "ops/s", value: opsPerSec, system: qlRueidis, against: "redsync-rueidis", goal: 1.1},
		{mode: Uncontended, metric: "ops/s", value: opsPerSec, system: "quorumlock-goredis-parallel", against: "redsync-goredis", goal: 1.0},
		{mode: Uncontended, metric: "ops/s", value: opsPerSec, system: "quorumlock-redigo-parallel", against: "redsync-redigo", goal: 1.0},
		{mode: Parallel, metric: "ops/s", value: opsPerSec, system: qlRueidis, against: "floor-rueidis", goal: 0.9},
		{mode: Parallel, metric: "ops/s", value: opsPerSec, system: qlRueidis, against: "redsync-rueidis", goal: 1.2},
	}
	for _, mode := range []string{Uncontended, Parallel} {
		for _, drv := range []string{"goredis", "rueidis"} {
			list = append(list, target{mode: mode, metric: "allocs/op", value: allocs,
				system: "quorumlock-" + drv + "-parallel", against: "floor-" + drv, atMost: true, goal: 1.5})
		}
	}
	for _, mode := range []string{ContendedShared, ContendedMulti} {
		list = append(list,
			target{mode: mode, metric: "wait p99", value: waitP99, system: qlRueidis, atMost: true,
				goal: float64(20 * time.Millisecond), fmt: fmtDur},
			target{mode: mode, metric: "releaser share", value: releaser, system: qlRueidis, atMost: true,
				goal: 0.30, fmt: fmtShare},
			target{mode: mode, metric: "acq/s", value: acqPerSec, system: qlRueidis, against: "redsync-rueidis", goal: 1.0},
			target{mode: mode, metric: "hand-off p50", value: handoff50, system: qlRueidis, atMost: true,
				goal: float64(500 * time.Microsecond), fmt: fmtDur},
		)
	}
	for i := range list {
		if list[i].fmt == nil {
			list[i].fmt = ratio
		}
	}
	return list
}

// WriteTargets writes the Targets section: for each node count, each
// target computed from the mean of the runs, with PASS or FAIL (or n/a
// when a system it needs was not measured).
func (r *Report) WriteTargets(w io.Writer) {
	fmt.Fprintln(w, "## Targets")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "From the mean of the runs of each system; a ratio divides the first system's mean by the second's.")
	fmt.Fprintln(w)
	var rows [][]string
	pass, fail, na := 0, 0, 0
	for _, n := range r.Nodes {
		for _, t := range targets() {
			what := fmt.Sprintf("%s %s", t.mode, t.metric)
			if t.against != "" {
				what += fmt.Sprintf(": %s ÷ %s", t.system, t.against)
			} else {
				what += ": " + t.system
			}
			op := "≥"
			if t.atMost {
				op = "≤"
			}
			v, ok := r.mean(n, t.mode, t.system, t.value)
			if ok > 0 && t.against != "" {
				d, dok := r.mean(n, t.mode, t.against, t.value)
				if dok == 0 || d == 0 {
					ok = 0
				} else {
					v /= d
				}
			}
			value, result := "n/a", "n/a"
			if ok > 0 && !math.IsNaN(v) {
				value = t.fmt(v)
				if (t.atMost && v <= t.goal) || (!t.atMost && v >= t.goal) {
					result = "PASS"
					pass++
				} else {
					result = "FAIL"
					fail++
				}
			} else {
				na++
			}
			rows = append(rows, []string{fmt.Sprint(n), what, value, op + " " + t.fmt(t.goal), result})
		}
	}
	writeTable(w, []string{"N", "target", "value", "goal", "result"}, rows)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%d PASS, %d FAIL, %d n/a.\n", pass, fail, na)
}
