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

// The modes of lockbench, in the order they run and are reported.
const (
	Uncontended     = "uncontended"
	Parallel        = "parallel"
	ContendedShared = "contended-shared"
	ContendedMulti  = "contended-multi"
)

// Modes lists every mode in order.
var Modes = []string{Uncontended, Parallel, ContendedShared, ContendedMulti}

// Contended reports whether mode is one of the contended modes.
func Contended(mode string) bool { return mode == ContendedShared || mode == ContendedMulti }

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
	// Throughput is set in the uncontended and parallel modes, Contention
	// in the contended ones.
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

func ct(f func(*measure.Contention) float64) func(Record) (float64, bool) {
	return func(r Record) (float64, bool) {
		if r.Contention == nil {
			return 0, false
		}
		return f(r.Contention), true
	}
}

func dur(d time.Duration) float64 { return float64(d) }

var throughputColumns = []column{
	{"ops/s", tp(func(t *measure.Throughput) float64 { return t.OpsPerSec }), fmtCount},
	{"p50", tp(func(t *measure.Throughput) float64 { return dur(t.P50) }), fmtDur},
	{"p99", tp(func(t *measure.Throughput) float64 { return dur(t.P99) }), fmtDur},
	{"allocs/op", tp(func(t *measure.Throughput) float64 { return t.AllocsPerOp }), fmtAllocs},
	{"B/op", tp(func(t *measure.Throughput) float64 { return t.BytesPerOp }), fmtCount},
}

var contentionColumns = []column{
	{"acq/s", ct(func(c *measure.Contention) float64 { return c.AcqPerSec }), fmtCount},
	{"hand-off p50", ct(func(c *measure.Contention) float64 { return dur(c.HandoffP50) }), fmtDur},
	{"hand-off p99", ct(func(c *measure.Contention) float64 { return dur(c.HandoffP99) }), fmtDur},
	{"wait p50", ct(func(c *measure.Contention) float64 { return dur(c.WaitP50) }), fmtDur},
	{"wait p99", ct(func(c *measure.Contention) float64 { return dur(c.WaitP99) }), fmtDur},
	{"wait max", ct(func(c *measure.Contention) float64 { return dur(c.WaitMax) }), fmtDur},
	{"releaser share", ct(func(c *measure.Contention) float64 { return c.ReleaserShare }), fmtShare},
	{"violations", ct(func(c *measure.Contention) float64 { return float64(c.Violations) }), fmtCount},
	{"failures", ct(func(c *measure.Contention) float64 { return float64(c.Failures) }), fmtCount},
}

func columnsOf(mode string) []column {
	if Contended(mode) {
		return contentionColumns
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
// that were measured.
func (r *Report) mean(nodes int, mode, system string, metric func(Record) (float64, bool)) (float64, int) {
	sum, n := 0.0, 0
	for _, rec := range r.Records {
		if rec.Nodes != nodes || rec.Mode != mode || rec.System != system || rec.Error != "" {
			continue
		}
		if v, ok := metric(rec); ok {
			sum += v
			n++
		}
	}
	if n == 0 {
		return math.NaN(), 0
	}
	return sum / float64(n), n
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
	switch {
	case v < 10e3:
		s = fmt.Sprintf("%.1f µs", v/1e3)
	case v < 1e6:
		s = fmt.Sprintf("%.0f µs", v/1e3)
	case v < 10e6:
		s = fmt.Sprintf("%.2f ms", v/1e6)
	case v < 100e6:
		s = fmt.Sprintf("%.1f ms", v/1e6)
	case v < 1e9:
		s = fmt.Sprintf("%.0f ms", v/1e6)
	default:
		s = fmt.Sprintf("%.2f s", v/1e9)
	}
	return sign + s
}
