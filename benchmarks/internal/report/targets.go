package report

import (
	"fmt"
	"io"
	"math"
	"time"
)

// target is one goal quorumlock sets itself: a metric of system in mode,
// divided by the same metric of against in mode when against is set, or by
// the same system's metric in the healthy mode base when base is set, and
// compared with goal. A target of a degraded mode (or with a base) is
// checked only from DegradedMinNodes nodes on.
type target struct {
	mode    string
	metric  column
	system  string
	against string // another system, same mode
	base    string // the same system, another mode
	atMost  bool   // the goal is an upper bound
	goal    float64
	fmt     func(float64) string
}

const (
	qlRueidis = "quorumlock-rueidis-parallel"
	qlGoredis = "quorumlock-goredis-parallel"
)

func ratio(v float64) string { return fmt.Sprintf("%.2f", v) }

// targets lists the goals, in the order they are printed.
func targets() []target {
	list := []target{
		{mode: Uncontended, metric: opsPerSec, system: qlRueidis, against: "floor-rueidis", goal: 1.0},
		{mode: Uncontended, metric: opsPerSec, system: qlRueidis, against: "redsync-rueidis", goal: 1.1},
		{mode: Uncontended, metric: opsPerSec, system: qlGoredis, against: "redsync-goredis", goal: 1.0},
		{mode: Uncontended, metric: opsPerSec, system: "quorumlock-redigo-parallel", against: "redsync-redigo", goal: 1.0},
		{mode: Parallel, metric: opsPerSec, system: qlRueidis, against: "floor-rueidis", goal: 0.9},
		{mode: Parallel, metric: opsPerSec, system: qlRueidis, against: "redsync-rueidis", goal: 1.2},
	}
	for _, mode := range []string{Uncontended, Parallel} {
		for _, drv := range []string{"goredis", "rueidis"} {
			list = append(list, target{mode: mode, metric: allocs,
				system: "quorumlock-" + drv + "-parallel", against: "floor-" + drv, atMost: true, goal: 1.3})
		}
	}
	for _, mode := range []string{ContendedShared, ContendedMulti} {
		list = append(list,
			target{mode: mode, metric: waitP99, system: qlRueidis, atMost: true,
				goal: float64(10 * time.Millisecond), fmt: fmtDur},
			target{mode: mode, metric: releaser, system: qlRueidis, atMost: true,
				goal: 0.30, fmt: fmtShare},
			target{mode: mode, metric: acqPerSec, system: qlRueidis, against: "redsync-rueidis", goal: 1.0},
			target{mode: mode, metric: handoffP50, system: qlRueidis, atMost: true,
				goal: float64(500 * time.Microsecond), fmt: fmtDur},
		)
	}
	// Degraded: a hung or dead herald costs little once noticed.
	for _, sys := range []string{qlRueidis, qlGoredis} {
		for _, mode := range []string{HungUncontended, DeadUncontended} {
			list = append(list,
				target{mode: mode, metric: opsPerSec, system: sys, base: Healthy(mode), goal: 0.8},
				target{mode: mode, metric: acquireP99, system: sys, base: Healthy(mode), atMost: true, goal: 2.0},
			)
		}
		for _, mode := range []string{HungContended, DeadContended} {
			list = append(list, target{mode: mode, metric: waitP99, system: sys, atMost: true,
				goal: float64(20 * time.Millisecond), fmt: fmtDur})
		}
	}
	for i := range list {
		if list[i].fmt == nil {
			list[i].fmt = ratio
		}
	}
	return list
}

// degraded reports whether t is checked only from DegradedMinNodes on.
func (t target) degraded() bool { return Degraded(t.mode) || t.base != "" }

// describe is the target column of t's row.
func (t target) describe() string {
	what := fmt.Sprintf("%s %s: %s", t.mode, t.metric.title, t.system)
	switch {
	case t.against != "":
		what += " ÷ " + t.against
	case t.base != "":
		what += " ÷ its " + t.base
	}
	return what
}

// evaluate computes t over n nodes from the means of the runs. It returns
// the value as printed and PASS, FAIL or n/a: n/a when a measurement it
// needs was not made (or failed), FAIL when t's own system was measured
// but the metric has no value (no operation succeeded, no waiter got the
// lock).
func (r *Report) evaluate(t target, n int) (value, result string) {
	v, valued, measured := r.mean(n, t.mode, t.system, t.metric.value)
	if measured == 0 {
		return "n/a", "n/a"
	}
	divisor := math.NaN()
	switch {
	case t.against != "":
		divisor, _, _ = r.mean(n, t.mode, t.against, t.metric.value)
	case t.base != "":
		divisor, _, _ = r.mean(n, t.base, t.system, t.metric.value)
	}
	if (t.against != "" || t.base != "") && (math.IsNaN(divisor) || divisor == 0) {
		return "n/a", "n/a"
	}
	if valued == 0 {
		return "none", "FAIL"
	}
	if !math.IsNaN(divisor) {
		v /= divisor
	}
	if (t.atMost && v <= t.goal) || (!t.atMost && v >= t.goal) {
		return t.fmt(v), "PASS"
	}
	return t.fmt(v), "FAIL"
}

// WriteTargets writes the Targets section: for each node count, each
// target computed from the mean of the runs, with PASS or FAIL (or n/a
// when a system or mode it needs was not measured). Targets of the
// degraded modes are left out below DegradedMinNodes nodes.
func (r *Report) WriteTargets(w io.Writer) {
	fmt.Fprintln(w, "## Targets")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "From the mean of the runs of each system; a ratio divides the first system's mean by the second's, or, for \"÷ its MODE\", the system's mean in a degraded mode by its own mean in the healthy MODE.")
	fmt.Fprintln(w)
	var rows [][]string
	count := map[string]int{}
	for _, n := range r.Nodes {
		for _, t := range targets() {
			if t.degraded() && n < DegradedMinNodes {
				continue
			}
			op := "≥"
			if t.atMost {
				op = "≤"
			}
			value, result := r.evaluate(t, n)
			count[result]++
			rows = append(rows, []string{fmt.Sprint(n), t.describe(), value, op + " " + t.fmt(t.goal), result})
		}
	}
	writeTable(w, []string{"N", "target", "value", "goal", "result"}, rows)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%d PASS, %d FAIL, %d n/a.\n", count["PASS"], count["FAIL"], count["n/a"])
}
