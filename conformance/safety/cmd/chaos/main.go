// Command chaos is the long safety run behind `make chaos`: many seeded
// runs of the safety rig (package conformance/safety), each with five
// redis-server processes behind fault proxies and 16 clients with their
// own Lockers, while nodes are killed and restarted empty after more than
// the TTL, stopped with SIGSTOP, slowed past the node timeout, throttled,
// hung, taken down and reset, each client is cut off from the nodes
// outside its own majority (the majorities ring), and clients stall past
// their locks' validity.
//
// -workload picks what the clients do: mutex (one key's plain lock and a
// read-modify-write of its register), rw (shared locks that read the
// register twice beside plain locks that write it), multi (AcquireAll
// over overlapping sets of keys, a read-modify-write of each key's
// register) or semaphore (AcquirePermit, 2 permits a key: each holder
// increments a count of the key's holders on entry, which must never read
// more than 2, and decrements it on exit). `make chaos` runs each.
//
// It prints one line per seed and then the totals: acquisitions, faults
// injected by kind, violations of mutual exclusion (which must be 0: lock
// and register histories porcupine found not linearizable, sections out
// of their validity, stale tokens, too many permit holders), lock keys left on the servers after
// the TTL (which must be 0), and the slowest acquisition. A history that
// is not linearizable is drawn by porcupine into an HTML file, named with
// the seed, whose path the violation prints. It exits 1 if any seed found
// a violation or left a key. A seed replays its run's faults:
//
//	cd conformance/safety && go run ./cmd/chaos -seeds 1 -first 1234 -v
//
// Flags:
//
//	-workload w    mutex, rw, multi or semaphore (default mutex)
//	-seeds n       runs (default 50)
//	-first n       seed of the first run (default: from the clock, printed)
//	-duration d    how long the clients of one run work (default 12s)
//	-nodes n       servers (default 5)
//	-clients n     clients, each with its own Locker (default 16)
//	-keys n        keys the clients share (default 3; 4 for multi)
//	-ttl d         lock TTL (default 1s)
//	-driver name   goredis, redigo, rueidis, or all: one per seed in turn (default all)
//	-no-guard      turn the restart guard off (the run should then find violations, in time)
//	-histories dir where porcupine's visualisations go (default: the system's temporary directory)
//	-v             print the schedule and every fault as it is injected
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	goredislib "github.com/redis/go-redis/v9"
	rueidislib "github.com/redis/rueidis"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/backends/redigo"
	"github.com/quorumlock/quorumlock/backends/rueidis"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/conformance/safety"
	"github.com/quorumlock/quorumlock/core"
)

var drivers = map[string]redistest.NodeFactory{
	"goredis": func(addr string) (core.Node, func() error, error) {
		c := goredislib.NewClient(goredis.ClientOptions(addr))
		n, err := goredis.New(c)
		return n, c.Close, err
	},
	"redigo": func(addr string) (core.Node, func() error, error) {
		p := redigo.NewPool(addr)
		n, err := redigo.New(p, redigo.WithName(addr))
		return n, p.Close, err
	},
	"rueidis": func(addr string) (core.Node, func() error, error) {
		c, err := rueidislib.NewClient(rueidis.ClientOption(addr))
		if err != nil {
			return nil, nil, err
		}
		n, err := rueidis.New(c)
		return n, func() error { c.Close(); return nil }, err
	},
}

// options are the command's flags.
type options struct {
	seeds, nodes, clients, keys int
	first                       int64
	duration, ttl               time.Duration
	driver, histories, workload string
	noGuard, verbose            bool
}

func parseFlags() options {
	var o options
	flag.StringVar(&o.workload, "workload", string(safety.MutexWorkload), "mutex, rw, multi or semaphore")
	flag.IntVar(&o.seeds, "seeds", 50, "runs")
	flag.Int64Var(&o.first, "first", 0, "seed of the first run (0: from the clock)")
	flag.DurationVar(&o.duration, "duration", 12*time.Second, "how long the clients of one run work")
	flag.IntVar(&o.nodes, "nodes", 5, "servers")
	flag.IntVar(&o.clients, "clients", 16, "clients, each with its own Locker")
	flag.IntVar(&o.keys, "keys", 0, "keys the clients share (0: 3, or 4 for multi)")
	flag.DurationVar(&o.ttl, "ttl", time.Second, "lock TTL")
	flag.StringVar(&o.driver, "driver", "all", "goredis, redigo, rueidis or all")
	flag.BoolVar(&o.noGuard, "no-guard", false, "turn the restart guard off")
	flag.StringVar(&o.histories, "histories", "", "where porcupine's visualisations go (default: the system's temporary directory)")
	flag.BoolVar(&o.verbose, "v", false, "print the schedule and every fault")
	flag.Parse()
	return o
}

func main() {
	o := parseFlags()
	redistest.QuietRedisLogs() // failed dials to a node that is down are the point of the run
	log.SetFlags(0)

	names := slices.Sorted(maps.Keys(drivers))
	if o.driver != "all" {
		if _, ok := drivers[o.driver]; !ok {
			log.Fatalf("chaos: unknown driver %q (want %s or all)", o.driver, strings.Join(names, ", "))
		}
		names = []string{o.driver}
	}
	if !slices.Contains(safety.Workloads, safety.Workload(o.workload)) {
		log.Fatalf("chaos: unknown workload %q (want one of %v)", o.workload, safety.Workloads)
	}
	if o.seeds < 1 {
		log.Fatal("chaos: -seeds must be at least 1")
	}
	if _, err := redistest.Binary(); err != nil {
		log.Fatal(err)
	}
	if o.first == 0 {
		o.first = time.Now().UnixNano() % 1_000_000
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	keys := fmt.Sprint(o.keys)
	if o.keys <= 0 {
		keys = "the workload's default"
	}
	fmt.Printf("chaos: workload %s, %d seeds from %d, %v each, %d nodes, %d clients, keys %s, TTL %v, drivers %s, restart guard %s\n",
		o.workload, o.seeds, o.first, o.duration, o.nodes, o.clients, keys, o.ttl, strings.Join(names, ","), map[bool]string{true: "off", false: "on"}[o.noGuard])
	total := safety.Report{Failures: map[string]int{}, Faults: map[safety.FaultKind]int{}}
	bad := 0
	start := time.Now()
	for i := range o.seeds {
		if !runSeed(ctx, o, o.first+int64(i), names[i%len(names)], &total) {
			bad++
		}
	}
	printTotals(os.Stdout, &total, o.seeds, time.Since(start))
	if bad > 0 {
		fmt.Printf("chaos: FAIL: %d of %d seeds broke safety or left keys\n", bad, o.seeds)
		os.Exit(1)
	}
	fmt.Println("chaos: PASS")
}

// runSeed runs seed with the driver name, prints its report and how to
// replay it if it found a violation or left a key, and adds it to total;
// it reports whether the seed kept safety. An error ends the command.
func runSeed(ctx context.Context, o options, seed int64, name string, total *safety.Report) bool {
	var opts []core.Option
	if o.noGuard {
		opts = append(opts, core.WithRestartGuard(0))
	}
	logf := func(string, ...any) {}
	if o.verbose {
		logf = func(format string, args ...any) { fmt.Printf("  "+format+"\n", args...) }
	}
	rep, err := safety.Run(ctx, safety.Config{
		Seed: seed, Workload: safety.Workload(o.workload), Duration: o.duration, Nodes: o.nodes, Clients: o.clients, Keys: o.keys, TTL: o.ttl,
		Options: opts, NewNode: drivers[name], Logf: logf, HistoryDir: o.histories,
	})
	if err != nil {
		log.Fatalf("chaos: seed %d (%s): %v", seed, name, err)
	}
	fmt.Printf("%-8s %v\n", name, rep)
	for _, v := range rep.Violations {
		fmt.Printf("  VIOLATION %v\n", v)
	}
	add(total, rep)
	if len(rep.Violations) > 0 || rep.LeftAfterTTL > 0 {
		fmt.Printf("  replay: (cd conformance/safety && go run ./cmd/chaos -workload %s -seeds 1 -first %d -driver %s -duration %v -v)\n", o.workload, seed, name, o.duration)
		return false
	}
	return true
}

func add(t, r *safety.Report) {
	t.Acquisitions += r.Acquisitions
	t.Sections += r.Sections
	t.Readers += r.Readers
	t.MostReaders = max(t.MostReaders, r.MostReaders)
	t.Sets += r.Sets
	t.LockOps += r.LockOps
	t.RegisterOps += r.RegisterOps
	t.Stalls += r.Stalls
	t.Noticed += r.Noticed
	t.Unused += r.Unused
	t.Violations = append(t.Violations, r.Violations...)
	t.LeftAtEnd += r.LeftAtEnd
	t.LeftAfterTTL += r.LeftAfterTTL
	t.Slowest = max(t.Slowest, r.Slowest)
	for k, v := range r.Failures {
		t.Failures[k] += v
	}
	for k, v := range r.Faults {
		t.Faults[k] += v
	}
}

func printTotals(w io.Writer, t *safety.Report, seeds int, elapsed time.Duration) {
	fmt.Fprintf(w, "\n== totals over %d seeds, %v\n", seeds, elapsed.Round(time.Second))
	fmt.Fprintf(w, "acquisitions:        %d (critical sections used: %d; granted with too little validity to use: %d)\n", t.Acquisitions, t.Sections, t.Unused)
	switch {
	case t.Readers > 0:
		fmt.Fprintf(w, "shared sections:     %d (at most %d on one key at once)\n", t.Readers, t.MostReaders)
	case t.Sets > 0:
		fmt.Fprintf(w, "sections of sets:    %d (of two keys or more)\n", t.Sets)
	}
	fmt.Fprintf(w, "checked operations:  %d on locks, %d on registers (porcupine)\n", t.LockOps, t.RegisterOps)
	failed := 0
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(t.Failures)) {
		failed += t.Failures[k]
		parts = append(parts, fmt.Sprintf("%s %d", k, t.Failures[k]))
	}
	fmt.Fprintf(w, "failed acquisitions: %d (%s)\n", failed, strings.Join(parts, ", "))
	faults := 0
	parts = parts[:0]
	for _, k := range safety.AllFaults {
		faults += t.Faults[k]
		parts = append(parts, fmt.Sprintf("%s %d", k, t.Faults[k]))
	}
	fmt.Fprintf(w, "faults injected:     %d (%s)\n", faults, strings.Join(parts, ", "))
	fmt.Fprintf(w, "stalled holders:     %d, of which noticed before use: %d\n", t.Stalls, t.Noticed)
	fmt.Fprintf(w, "violations:          %d\n", len(t.Violations))
	fmt.Fprintf(w, "locks left:          %d right after the run, %d after the TTL\n", t.LeftAtEnd, t.LeftAfterTTL)
	fmt.Fprintf(w, "slowest acquisition: %v\n", t.Slowest.Round(time.Millisecond))
}
