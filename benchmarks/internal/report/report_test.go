package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/benchmarks/internal/measure"
)

func TestModes(t *testing.T) {
	for _, c := range []struct {
		mode, fault, healthy string
		contended            bool
	}{
		{Uncontended, "", Uncontended, false},
		{ContendedMulti, "", ContendedMulti, true},
		{HungUncontended, Hung, Uncontended, false},
		{DeadUncontended, Dead, Uncontended, false},
		{HungContended, Hung, ContendedShared, true},
		{DeadContended, Dead, ContendedShared, true},
	} {
		if f, h, ct := Fault(c.mode), Healthy(c.mode), Contended(c.mode); f != c.fault || h != c.healthy || ct != c.contended {
			t.Errorf("%s: fault %q, healthy %q, contended %v; want %q, %q, %v", c.mode, f, h, ct, c.fault, c.healthy, c.contended)
		}
	}
}

func throughput(ops int64, opsPerSec float64, acqP99 time.Duration) *measure.Throughput {
	return &measure.Throughput{Ops: ops, OpsPerSec: opsPerSec, AcquireP99: acqP99, P99: 2 * acqP99}
}

// row returns the line of the Targets table whose target column is what
// at n nodes.
func row(t *testing.T, out string, n, what string) string {
	t.Helper()
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "| "+n+" | "+what+" |") {
			return line
		}
	}
	t.Fatalf("no row %q at N=%s in\n%s", what, n, out)
	return ""
}

func TestDegradedTargets(t *testing.T) {
	ms := time.Millisecond
	r := &Report{Runs: 1, Nodes: []int{1, 3}, Systems: []string{qlRueidis, qlGoredis}}
	add := func(nodes int, mode, sys string, tp *measure.Throughput, c *measure.Contention) {
		r.Records = append(r.Records, Record{Run: 1, Nodes: nodes, Mode: mode, System: sys, Throughput: tp, Contention: c})
	}
	add(1, Uncontended, qlRueidis, throughput(1000, 1000, ms), nil)
	add(3, Uncontended, qlRueidis, throughput(1000, 1000, ms), nil)
	add(3, HungUncontended, qlRueidis, throughput(900, 900, 3*ms), nil)
	add(3, DeadUncontended, qlRueidis, throughput(0, 0, 0), nil)
	add(3, HungContended, qlRueidis, nil, &measure.Contention{Acquisitions: 10, Waits: 5, WaitP99: 5 * ms})
	add(3, DeadContended, qlRueidis, nil, &measure.Contention{})
	add(3, Uncontended, qlGoredis, throughput(1000, 1000, ms), nil)
	r.Records = append(r.Records, Record{Run: 1, Nodes: 3, Mode: HungUncontended, System: qlGoredis, Error: "open: refused"})

	var b bytes.Buffer
	r.WriteTargets(&b)
	out := b.String()
	if strings.Contains(out, "| 1 | hung-") || strings.Contains(out, "| 1 | dead-") {
		t.Errorf("degraded targets at N=1:\n%s", out)
	}
	for _, c := range []struct{ what, want string }{
		{"hung-uncontended ops/s: quorumlock-rueidis-parallel ÷ its uncontended", "| 0.90 | ≥ 0.80 | PASS |"},
		{"hung-uncontended acquire p99: quorumlock-rueidis-parallel ÷ its uncontended", "| 3.00 | ≤ 2.00 | FAIL |"},
		{"dead-uncontended ops/s: quorumlock-rueidis-parallel ÷ its uncontended", "| 0.00 | ≥ 0.80 | FAIL |"},
		// No operation succeeded: no latency, a failure rather than a pass.
		{"dead-uncontended acquire p99: quorumlock-rueidis-parallel ÷ its uncontended", "| none | ≤ 2.00 | FAIL |"},
		{"hung-contended wait p99: quorumlock-rueidis-parallel", "| 5.00 ms | ≤ 20.0 ms | PASS |"},
		{"dead-contended wait p99: quorumlock-rueidis-parallel", "| none | ≤ 20.0 ms | FAIL |"},
		// A measurement that failed, or was not made: n/a.
		{"hung-uncontended ops/s: quorumlock-goredis-parallel ÷ its uncontended", "| n/a | ≥ 0.80 | n/a |"},
		{"dead-contended wait p99: quorumlock-goredis-parallel", "| n/a | ≤ 20.0 ms | n/a |"},
	} {
		if got := row(t, out, "3", c.what); !strings.HasSuffix(strings.TrimSpace(got), c.want) {
			t.Errorf("%s\ngot  %s\nwant … %s", c.what, strings.TrimSpace(got), c.want)
		}
	}
}

func TestDegradedTable(t *testing.T) {
	r := &Report{Runs: 1, Nodes: []int{3}, Systems: []string{qlRueidis}, Records: []Record{
		{Run: 1, Nodes: 3, Mode: HungUncontended, System: qlRueidis,
			Throughput: &measure.Throughput{Ops: 0, Errors: 7, FirstError: "context deadline exceeded"}},
	}}
	var b bytes.Buffer
	r.WriteTables(&b, Modes)
	out := b.String()
	for _, want := range []string{
		"## hung-uncontended",
		"| N | system | ops/s | p50 | p99 | acquire p50 | acquire p99 | allocs/op | B/op | errors |",
		"| 3 | quorumlock-rueidis-parallel | 0 | – | – | – | – | 0.0 | 0 | 7 |",
		"7 failed operations (first: context deadline exceeded)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}

func TestFmtDur(t *testing.T) {
	for v, want := range map[float64]string{
		1.5e3: "1.5 µs", 9.97e3: "10 µs", 999.7e3: "1.00 ms", 9.996e6: "10.0 ms",
		99.97e6: "100 ms", 999.76e6: "1.00 s", -402e6: "-402 ms",
	} {
		if got := fmtDur(v); got != want {
			t.Errorf("fmtDur(%v) = %q, want %q", v, got, want)
		}
	}
}
