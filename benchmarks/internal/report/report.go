package report

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/benchmarks/internal/measure"
)

// The modes of lockbench, in the order they run and are reported. The
// last four are the degraded modes: one server, the herald, is hung or
// dead while they measure as uncontended or contended-shared do.
const (
	Uncontended     = "uncontended"
	Parallel        = "parallel"
	ContendedShared = "contended-shared"
	ContendedMulti  = "contended-multi"
	HungUncontended = "hung-uncontended"
	DeadUncontended = "dead-uncontended"
	HungContended   = "hung-contended"
	DeadContended   = "dead-contended"
)

// Modes lists every mode in order.
var Modes = []string{Uncontended, Parallel, ContendedShared, ContendedMulti,
	HungUncontended, DeadUncontended, HungContended, DeadContended}

// The faults of the degraded modes: the herald stopped with SIGSTOP (it
// keeps its connections and answers nothing), or shut down (connections
// refused).
const (
	Hung = "hung"
	Dead = "dead"
)

// DegradedMinNodes is the smallest node count the degraded modes are
// measured with: a majority must be left when one server fails.
const DegradedMinNodes = 3

// Contended reports whether mode is one of the contended modes.
func Contended(mode string) bool {
	switch mode {
	case ContendedShared, ContendedMulti, HungContended, DeadContended:
		return true
	}
	return false
}

// Fault returns the fault of a degraded mode, Hung or Dead, and "" for a
// healthy mode.
func Fault(mode string) string {
	switch mode {
	case HungUncontended, HungContended:
		return Hung
	case DeadUncontended, DeadContended:
		return Dead
	}
	return ""
}

// Degraded reports whether mode is one of the degraded modes.
func Degraded(mode string) bool { return Fault(mode) != "" }

// Healthy returns the healthy mode that a degraded mode measures like and
// is compared with (uncontended or contended-shared), or mode itself when
// it is healthy.
func Healthy(mode string) string {
	switch mode {
	case HungUncontended, DeadUncontended:
		return Uncontended
	case HungContended, DeadContended:
		return ContendedShared
	}
	return mode
}

// Record is one measurement: one line of the JSON output.
type Record struct {
	// Run counts from 1.
	Run    int    `json:"run"`
	Nodes  int    `json:"nodes"`
	Mode   string `json:"mode"`
	System string `json:"system"`
	// Started is when the measurement began (instances opened).
	Started time.Time `json:"started"`
	// Took is the whole measurement: opening, warm-up, measuring, closing.
	Took time.Duration `json:"took_ns"`
	// Error says why the measurement could not be made (open or warm-up
	// failed); CloseError what closing the instances returned.
	Error      string `json:"error,omitempty"`
	CloseError string `json:"close_error,omitempty"`
	// LeakedGoroutines counts goroutines still running five seconds after
	// the instances were closed, beyond those running before they opened.
	LeakedGoroutines int `json:"leaked_goroutines,omitempty"`
	// Throughput is set in the uncontended, parallel and degraded
	// uncontended modes, Contention in the contended ones.
	Throughput *measure.Throughput `json:"throughput,omitempty"`
	Contention *measure.Contention `json:"contention,omitempty"`
}

// Report gathers the records of a run of lockbench and writes them as
// markdown.
type Report struct {
	// Runs is the number of runs asked for; Nodes and Systems give the
	// order of rows.
	Runs    int
	Nodes   []int
	Systems []string
	// Notes are extra lines printed under every table of a mode (by mode).
	Notes map[string][]string
	// Records are the measurements, in any order.
	Records []Record
}

// find returns the record of (run, nodes, mode, system).
func (r *Report) find(run, nodes int, mode, system string) (Record, bool) {
	for _, rec := range r.Records {
		if rec.Run == run && rec.Nodes == nodes && rec.Mode == mode && rec.System == system {
			return rec, true
		}
	}
	return Record{}, false
}

// column is one metric column of a table.
type column struct {
	title string
	value func(Record) (float64, bool)
	fmt   func(float64) string
}

func tp(f func(*measure.Throughput) float64) func(Record) (float64, bool) {
	return func(r Record) (float64, bool) {
		if r.Throughput == nil {
			return 0, false
		}
		return f(r.Throughput), true
	}
}

// tpLatency is tp for a latency quantile, which has no value when no
// operation succeeded.
func tpLatency(f func(*measure.Throughput) time.Duration) func(Record) (float64, bool) {
	return func(r Record) (float64, bool) {
		if r.Throughput == nil || r.Throughput.Ops == 0 {
			return 0, false
		}
		return dur(f(r.Throughput)), true
	}
}

func ct(f func(*measure.Contention) float64) func(Record) (float64, bool) {
	return func(r Record) (float64, bool) {
		if r.Contention == nil {
			return 0, false
		}
		return f(r.Contention), true
	}
}

// ctPairs and ctWait are ct for the metrics of hand-offs (which need two
// acquisitions) and of waits (which need one taken over from another
// goroutine): they have no value without them.
func ctPairs(f func(*measure.Contention) float64) func(Record) (float64, bool) {
	return func(r Record) (float64, bool) {
		if r.Contention == nil || r.Contention.Acquisitions+r.Contention.Late < 2 {
			return 0, false
		}
		return f(r.Contention), true
	}
}

func ctWait(f func(*measure.Contention) time.Duration) func(Record) (float64, bool) {
	return func(r Record) (float64, bool) {
		if r.Contention == nil || r.Contention.Waits == 0 {
			return 0, false
		}
		return dur(f(r.Contention)), true
	}
}

func dur(d time.Duration) float64 { return float64(d) }

// The metrics of the tables and targets.
var (
	opsPerSec  = column{"ops/s", tp(func(t *measure.Throughput) float64 { return t.OpsPerSec }), fmtCount}
	opP50      = column{"p50", tpLatency(func(t *measure.Throughput) time.Duration { return t.P50 }), fmtDur}
	opP99      = column{"p99", tpLatency(func(t *measure.Throughput) time.Duration { return t.P99 }), fmtDur}
	acquireP50 = column{"acquire p50", tpLatency(func(t *measure.Throughput) time.Duration { return t.AcquireP50 }), fmtDur}
	acquireP99 = column{"acquire p99", tpLatency(func(t *measure.Throughput) time.Duration { return t.AcquireP99 }), fmtDur}
	allocs     = column{"allocs/op", tp(func(t *measure.Throughput) float64 { return t.AllocsPerOp }), fmtAllocs}
	bytesPerOp = column{"B/op", tp(func(t *measure.Throughput) float64 { return t.BytesPerOp }), fmtCount}
	opErrors   = column{"errors", tp(func(t *measure.Throughput) float64 { return float64(t.Errors) }), fmtCount}

	acqPerSec  = column{"acq/s", ct(func(c *measure.Contention) float64 { return c.AcqPerSec }), fmtCount}
	handoffP50 = column{"hand-off p50", ctPairs(func(c *measure.Contention) float64 { return dur(c.HandoffP50) }), fmtDur}
	handoffP99 = column{"hand-off p99", ctPairs(func(c *measure.Contention) float64 { return dur(c.HandoffP99) }), fmtDur}
	waitP50    = column{"wait p50", ctWait(func(c *measure.Contention) time.Duration { return c.WaitP50 }), fmtDur}
	waitP99    = column{"wait p99", ctWait(func(c *measure.Contention) time.Duration { return c.WaitP99 }), fmtDur}
	waitMax    = column{"wait max", ctWait(func(c *measure.Contention) time.Duration { return c.WaitMax }), fmtDur}
	releaser   = column{"releaser share", ctPairs(func(c *measure.Contention) float64 { return c.ReleaserShare }), fmtShare}
)

var throughputColumns = []column{opsPerSec, opP50, opP99, acquireP50, acquireP99, allocs, bytesPerOp}

// degradedThroughputColumns add the failed operations, which the healthy
// tables leave to the notes.
var degradedThroughputColumns = append(slices.Clip(throughputColumns), opErrors)

var contentionColumns = []column{
	acqPerSec, handoffP50, handoffP99, waitP50, waitP99, waitMax, releaser,
	{"violations", ct(func(c *measure.Contention) float64 { return float64(c.Violations) }), fmtCount},
	{"failures", ct(func(c *measure.Contention) float64 { return float64(c.Failures) }), fmtCount},
}

func columnsOf(mode string) []column {
	switch {
	case Contended(mode):
		return contentionColumns
	case Degraded(mode):
		return degradedThroughputColumns
	}
	return throughputColumns
}

// WriteTables writes one table per mode of modes that has records: rows
// (nodes, system), each metric's runs side by side ("run 1 / run 2").
func (r *Report) WriteTables(w io.Writer, modes []string) {
	for _, mode := range modes {
		cols := columnsOf(mode)
		var rows [][]string
		for _, n := range r.Nodes {
			for _, sys := range r.Systems {
				recs := make([]*Record, r.Runs)
				found := false
				for run := 1; run <= r.Runs; run++ {
					if rec, ok := r.find(run, n, mode, sys); ok {
						recs[run-1] = &rec
						found = true
					}
				}
				if !found {
					continue
				}
				row := []string{fmt.Sprint(n), sys}
				for _, c := range cols {
					cells := make([]string, r.Runs)
					for i, rec := range recs {
						cells[i] = cell(rec, c)
					}
					row = append(row, strings.Join(cells, " / "))
				}
				rows = append(rows, row)
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(w, "## %s\n\n", mode)
		head := []string{"N", "system"}
		for _, c := range cols {
			head = append(head, c.title)
		}
		writeTable(w, head, rows)
		fmt.Fprintln(w)
		for _, note := range r.Notes[mode] {
			fmt.Fprintln(w, note)
		}
		for _, p := range r.problems(mode) {
			fmt.Fprintln(w, p)
		}
		fmt.Fprintln(w)
	}
}

func cell(rec *Record, c column) string {
	switch {
	case rec == nil:
		return "–"
	case rec.Error != "":
		return "error"
	}
	v, ok := c.value(*rec)
	if !ok {
		return "–"
	}
	return c.fmt(v)
}

// problems lists, for the notes under a table, what went wrong in mode's
// measurements: errors, failed releases, leaked goroutines.
func (r *Report) problems(mode string) []string {
	var out []string
	for _, rec := range r.sorted() {
		if rec.Mode != mode {
			continue
		}
		var what []string
		if rec.Error != "" {
			what = append(what, "not measured: "+rec.Error)
		}
		if t := rec.Throughput; t != nil {
			if t.Errors > 0 {
				what = append(what, fmt.Sprintf("%d failed operations (first: %s)", t.Errors, t.FirstError))
			}
			if t.Hung > 0 {
				what = append(what, fmt.Sprintf("%d of %d workers hung in an operation until the instance was closed", t.Hung, t.Workers))
			}
		}
		if c := rec.Contention; c != nil {
			if c.Failures > 0 {
				what = append(what, fmt.Sprintf("%d failed acquisitions (first: %s)", c.Failures, c.FirstError))
			}
			if c.ReleaseErrors > 0 {
				what = append(what, fmt.Sprintf("%d failed releases (first: %s)", c.ReleaseErrors, c.FirstReleaseError))
			}
			if c.Hung > 0 {
				what = append(what, fmt.Sprintf("%d of %d goroutines hung until the instances were closed", c.Hung, c.Goroutines))
			}
		}
		if rec.CloseError != "" {
			what = append(what, "close: "+rec.CloseError)
		}
		if rec.LeakedGoroutines > 0 {
			what = append(what, fmt.Sprintf("%d goroutines outlived Close", rec.LeakedGoroutines))
		}
		if len(what) > 0 {
			out = append(out, fmt.Sprintf("- run %d, N=%d, %s: %s", rec.Run, rec.Nodes, rec.System, strings.Join(what, "; ")))
		}
	}
	return out
}

// sorted returns the records in report order: run, nodes, system.
func (r *Report) sorted() []Record {
	recs := slices.Clone(r.Records)
	order := func(sys string) int { return slices.Index(r.Systems, sys) }
	slices.SortStableFunc(recs, func(a, b Record) int {
		if a.Run != b.Run {
			return a.Run - b.Run
		}
		if a.Nodes != b.Nodes {
			return a.Nodes - b.Nodes
		}
		return order(a.System) - order(b.System)
	})
	return recs
}

// mean returns the mean of metric over the runs of (nodes, mode, system)
// that were measured and have a value of it, how many those are, and how
// many runs were measured at all (without an error).
func (r *Report) mean(nodes int, mode, system string, metric func(Record) (float64, bool)) (v float64, valued, measured int) {
	sum := 0.0
	for _, rec := range r.Records {
		if rec.Nodes != nodes || rec.Mode != mode || rec.System != system || rec.Error != "" {
			continue
		}
		measured++
		if v, ok := metric(rec); ok {
			sum += v
			valued++
		}
	}
	if valued == 0 {
		return math.NaN(), 0, measured
	}
	return sum / float64(valued), valued, measured
}

func writeTable(w io.Writer, head []string, rows [][]string) {
	line := func(cells []string) { fmt.Fprintln(w, "| "+strings.Join(cells, " | ")+" |") }
	line(head)
	seps := make([]string, len(head))
	for i := range seps {
		seps[i] = "---"
		if i >= 2 {
			seps[i] = "--:"
		}
	}
	line(seps)
	for _, row := range rows {
		line(row)
	}
}

func fmtCount(v float64) string { return fmt.Sprintf("%.0f", v) }

func fmtAllocs(v float64) string { return fmt.Sprintf("%.1f", v) }

func fmtShare(v float64) string { return fmt.Sprintf("%.2f", v) }

// fmtDur formats nanoseconds in µs, ms or s with three significant digits
// or so.
func fmtDur(v float64) string {
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	var s string
	// Each bound is where the next unit's rounding starts ("1000 ms" is
	// "1.00 s").
	switch {
	case v < 9.95e3:
		s = fmt.Sprintf("%.1f µs", v/1e3)
	case v < 999.5e3:
		s = fmt.Sprintf("%.0f µs", v/1e3)
	case v < 9.995e6:
		s = fmt.Sprintf("%.2f ms", v/1e6)
	case v < 99.95e6:
		s = fmt.Sprintf("%.1f ms", v/1e6)
	case v < 999.5e6:
		s = fmt.Sprintf("%.0f ms", v/1e6)
	default:
		s = fmt.Sprintf("%.2f s", v/1e9)
	}
	return sign + s
}
