package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/quorumlock/quorumlock/benchmarks/internal/measure"
	"github.com/quorumlock/quorumlock/benchmarks/internal/report"
	"github.com/quorumlock/quorumlock/benchmarks/internal/systems"
	"github.com/quorumlock/quorumlock/conformance/redistest"
)

const (
	// maxNodes is the number of redis-server processes the benchmark can
	// start.
	maxNodes = 5
	// parallelWorkers is the number of goroutines of the parallel mode.
	parallelWorkers = 64
	// contenders is the number of goroutines of the contended modes.
	contenders = 16
	// leakGrace is how long goroutines may take to end after Close.
	leakGrace = 5 * time.Second
)

// settings are the parsed flags.
type settings struct {
	nodes    []int
	duration time.Duration
	runs     int
	systems  *regexp.Regexp
	modes    *regexp.Regexp
	json     string
	quick    bool
	// degraded: whether the degraded modes may run (not in -quick, unless
	// -modes is given).
	degraded bool
	raw      map[string]string // flag name: value as given or defaulted
}

func main() { os.Exit(run()) }

// run is lockbench: it returns the exit code, 2 for bad flags, 3 for an
// unsound measurement of quorumlock, 1 for any other failure.
func run() int {
	s, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	sys, modes := selected(s)
	if len(sys) == 0 || len(modes) == 0 {
		fmt.Fprintln(os.Stderr, "lockbench: -systems and -modes leave nothing to measure")
		return 2
	}
	if slices.ContainsFunc(modes, report.Degraded) {
		// go-redis logs every failed dial to the dead herald; the failures
		// that matter are in the records.
		redistest.QuietRedisLogs()
	}

	var jsonOut *json.Encoder
	if s.json != "" {
		f, err := os.Create(s.json)
		if err != nil {
			fmt.Fprintln(os.Stderr, "lockbench:", err)
			return 1
		}
		defer f.Close()
		jsonOut = json.NewEncoder(f) // one write per record
	}

	printHeader(s)
	b, err := startBench(ctx, s, jsonOut)
	defer b.close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		return 1
	}
	rep := &report.Report{Runs: s.runs, Nodes: s.nodes, Notes: notes(s, b.heralds(modes))}
	for _, sy := range sys {
		rep.Systems = append(rep.Systems, sy.Name)
	}
	restoreErr := b.runPlan(ctx, plan(s, sys, modes), rep)

	rep.WriteTables(os.Stdout, modes)
	rep.WriteTargets(os.Stdout)
	if bad := unsound(rep.Records); len(bad) > 0 {
		for _, problem := range bad {
			fmt.Fprintln(os.Stderr, "lockbench:", problem)
		}
		return 3
	}
	if restoreErr != nil {
		return 1
	}
	return 0
}

// selected returns the systems and the modes the settings select: the
// degraded modes only when s.degraded.
func selected(s settings) ([]systems.System, []string) {
	var sys []systems.System
	for _, sy := range systems.All() {
		if s.systems.MatchString(sy.Name) {
			sys = append(sys, sy)
		}
	}
	var modes []string
	for _, m := range report.Modes {
		if s.modes.MatchString(m) && (s.degraded || !report.Degraded(m)) {
			modes = append(modes, m)
		}
	}
	return sys, modes
}

// printHeader prints machineHeader on standard output, and its list
// lines on standard error too.
func printHeader(s settings) {
	header := machineHeader(s)
	fmt.Print(header)
	for line := range strings.Lines(header) {
		if strings.HasPrefix(line, "- ") {
			fmt.Fprint(os.Stderr, line)
		}
	}
}

// task is one measurement of the plan: a system in a mode on the first
// nodes servers, in a run.
type task struct {
	run, nodes int
	mode       string
	sys        systems.System
}

// plan lists the measurements, run after run, each run over every node
// count, mode and system, without the pairs that cannot be: a system that
// does not support the node count, a floor in a contended mode, a degraded
// mode below report.DegradedMinNodes.
func plan(s settings, sys []systems.System, modes []string) []task {
	var tasks []task
	for r := 1; r <= s.runs; r++ {
		for _, n := range s.nodes {
			for _, m := range modes {
				for _, sy := range sys {
					if !sy.Supports(n) || (sy.Floor && report.Contended(m)) ||
						(report.Degraded(m) && n < report.DegradedMinNodes) {
						continue
					}
					tasks = append(tasks, task{r, n, m, sy})
				}
			}
		}
	}
	return tasks
}

// bench is what the measurements of one lockbench run share: the
// settings, the servers and their addresses, and the JSON output (nil:
// none).
type bench struct {
	settings settings
	servers  []*redistest.Server
	addrs    []string
	jsonOut  *json.Encoder
}

// startBench starts the servers the settings need, and prints their
// addresses on standard error. It returns a bench to close even with an
// error: the servers that did start.
func startBench(ctx context.Context, s settings, jsonOut *json.Encoder) (*bench, error) {
	servers, err := startServers(ctx, slices.Max(s.nodes))
	b := &bench{settings: s, servers: servers, jsonOut: jsonOut}
	if err != nil {
		return b, err
	}
	for _, srv := range servers {
		b.addrs = append(b.addrs, srv.Addr())
	}
	fmt.Fprintf(os.Stderr, "servers: %s\n", strings.Join(b.addrs, " "))
	return b, nil
}

// close stops the servers.
func (b *bench) close() {
	for _, srv := range b.servers {
		_ = srv.Close()
	}
}

// heralds returns, and prints on standard error, the herald's address by
// node count, for the node counts the degraded modes among modes measure.
func (b *bench) heralds(modes []string) map[int]string {
	heralds := map[int]string{}
	for _, n := range b.settings.nodes {
		if n >= report.DegradedMinNodes && slices.ContainsFunc(modes, report.Degraded) {
			heralds[n] = b.addrs[heraldOf(b.addrs[:n])]
			fmt.Fprintf(os.Stderr, "herald at N=%d (failed in the degraded modes): %s\n", n, heralds[n])
		}
	}
	return heralds
}

// runPlan makes the measurements of tasks in turn, adding each record to
// rep (and to the JSON output), with a progress line on standard error.
// It stops early at an interrupt, or when a measurement could not bring
// its herald back: that error, which leaves the servers unfit for more.
func (b *bench) runPlan(ctx context.Context, tasks []task, rep *report.Report) error {
	start := time.Now()
	var restoreErr error
	for i, t := range tasks {
		if ctx.Err() != nil {
			fmt.Fprintf(os.Stderr, "lockbench: interrupted after %d of %d measurements\n", i, len(tasks))
			break
		}
		prefix := fmt.Sprintf("lockbench:%d:%d:", os.Getpid(), i)
		var herald *redistest.Server
		if report.Degraded(t.mode) {
			herald = b.servers[heraldOf(b.addrs[:t.nodes])]
		}
		rec, rerr := measureOne(ctx, t.sys, t.mode, b.addrs[:t.nodes], herald, b.settings.duration, prefix)
		rec.Run, rec.Nodes = t.run, t.nodes
		rep.Records = append(rep.Records, rec)
		if b.jsonOut != nil {
			if err := b.jsonOut.Encode(rec); err != nil {
				fmt.Fprintln(os.Stderr, "lockbench: writing JSON:", err)
			}
		}
		done := time.Since(start)
		eta := time.Duration(float64(done) / float64(i+1) * float64(len(tasks)-i-1))
		fmt.Fprintf(os.Stderr, "[%3d/%d] run %d/%d N=%d %-16s %-32s %s [%.1fs, elapsed %s, ETA %s]\n",
			i+1, len(tasks), t.run, b.settings.runs, t.nodes, t.mode, t.sys.Name, progress(rec),
			rec.Took.Seconds(), done.Round(time.Second), eta.Round(time.Second))
		if rerr != nil {
			// The servers are no longer what the next measurements assume.
			restoreErr = rerr
			fmt.Fprintf(os.Stderr, "lockbench: %v; stopping after %d of %d measurements\n", rerr, i+1, len(tasks))
			break
		}
	}
	fmt.Fprintf(os.Stderr, "lockbench: %d measurements in %s\n", len(rep.Records), time.Since(start).Round(time.Second))
	return restoreErr
}

// unsound lists the measurements of quorumlock that show a fault of the
// library rather than a slow figure: an overlap of two holders, a hung
// worker, a leaked goroutine, or a measurement that could not be made. Any
// of them makes lockbench exit non-zero, so that its smoke run in make
// test fails. (Failed operations are only reported: on a starved machine,
// node timeouts are the library doing its job.) The degraded modes are
// held to the same: a failed server may cost speed, never soundness.
func unsound(records []report.Record) []string {
	var out []string
	for _, r := range records {
		if !strings.HasPrefix(r.System, "quorumlock-") {
			continue
		}
		var problems []string
		if r.Error != "" {
			problems = append(problems, "error: "+r.Error)
		}
		if r.LeakedGoroutines > 0 {
			problems = append(problems, fmt.Sprintf("%d goroutines leaked", r.LeakedGoroutines))
		}
		if t := r.Throughput; t != nil && t.Hung > 0 {
			problems = append(problems, fmt.Sprintf("%d workers hung", t.Hung))
		}
		if c := r.Contention; c != nil && (c.Violations > 0 || c.Hung > 0) {
			problems = append(problems, fmt.Sprintf("%d violations, %d contenders hung", c.Violations, c.Hung))
		}
		if len(problems) > 0 {
			out = append(out, fmt.Sprintf("run %d N=%d %s %s: %s", r.Run, r.Nodes, r.Mode, r.System, strings.Join(problems, "; ")))
		}
	}
	return out
}

func parseFlags() (settings, error) {
	nodes := flag.String("nodes", "1,3,5", "comma-separated node counts (1 to 5)")
	duration := flag.Duration("duration", time.Second, "length of each measurement")
	runs := flag.Int("runs", 2, "runs of the whole set, interleaved and reported side by side")
	sysRe := flag.String("systems", ".", "regular expression: only systems whose name matches")
	modeRe := flag.String("modes", ".", "regular expression: only modes whose name matches")
	jsonPath := flag.String("json", "lockbench.jsonl", "file for one JSON object per measurement (empty: none)")
	quick := flag.Bool("quick", false, "smoke test: -duration 200ms -runs 1 unless given, and no degraded modes unless -modes is given")
	flag.Parse()
	if flag.NArg() > 0 {
		return settings{}, fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	given := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if *quick {
		if !given["duration"] {
			*duration = 200 * time.Millisecond
		}
		if !given["runs"] {
			*runs = 1
		}
	}
	s := settings{duration: *duration, runs: *runs, json: *jsonPath, quick: *quick,
		degraded: !*quick || given["modes"]}
	for f := range strings.SplitSeq(*nodes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > maxNodes {
			return s, fmt.Errorf("-nodes: %q is not a node count from 1 to %d", f, maxNodes)
		}
		if !slices.Contains(s.nodes, n) {
			s.nodes = append(s.nodes, n)
		}
	}
	slices.Sort(s.nodes)
	if s.duration <= 0 {
		return s, errors.New("-duration must be positive")
	}
	if s.runs < 1 {
		return s, errors.New("-runs must be at least 1")
	}
	var err error
	if s.systems, err = regexp.Compile(*sysRe); err != nil {
		return s, fmt.Errorf("-systems: %w", err)
	}
	if s.modes, err = regexp.Compile(*modeRe); err != nil {
		return s, fmt.Errorf("-modes: %w", err)
	}
	s.raw = map[string]string{}
	flag.VisitAll(func(f *flag.Flag) { s.raw[f.Name] = f.Value.String() })
	s.raw["duration"] = s.duration.String()
	s.raw["runs"] = strconv.Itoa(s.runs)
	return s, nil
}

// machineHeader describes the machine, the servers and the settings, and
// says what each system is.
func machineHeader(s settings) string {
	var b strings.Builder
	b.WriteString("# lockbench: quorumlock and its peers against real redis-server\n\n")
	cpu := cpuModel()
	fmt.Fprintf(&b, "- machine: %d CPUs (%s), %s/%s, %s\n", runtime.NumCPU(), cpu, runtime.GOOS, runtime.GOARCH, runtime.Version())
	fmt.Fprintf(&b, "- redis-server: %s, %d processes on loopback, no persistence\n", redisVersion(), slices.Max(s.nodes))
	names := []string{"nodes", "duration", "runs", "systems", "modes", "json", "quick"}
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("-%s %q", n, s.raw[n])
	}
	fmt.Fprintf(&b, "- settings: %s\n", strings.Join(parts, " "))
	fmt.Fprintf(&b, "- started: %s\n\n", time.Now().UTC().Format(time.RFC3339))
	b.WriteString(`Systems: quorumlock-DRIVER-STRATEGY is core.New over one node per server with core.WithStrategy, other options at their defaults;
redsync-DRIVER is redsync v4 with one pool per server and rs.NewMutex(key), default options (LockContext/UnlockContext);
rueidislock is rueidislock.NewLocker with KeyMajority 1 (N=1 only); redislock is bsm/redislock.Obtain with a 10 s TTL (N=1 only);
floor-DRIVER is the bare protocol (SET NX PX on each node, EVALSHA compare-and-delete, majority wins) with no library around it.
Every system but rueidislock uses the client settings of quorumlock's backend helpers (goredis.ClientOptions, redigo.NewPool,
rueidis.ClientOption, valkey.ClientOption), one client per server; rueidislock builds its own client with rueidis's defaults (it needs client-side caching).
Cells show the runs side by side: run 1 / run 2 / …

`)
	return b.String()
}

// cpuModel reads the CPU's model name from /proc/cpuinfo, if it can.
func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for line := range strings.Lines(string(data)) {
		if name, ok := strings.CutPrefix(line, "model name"); ok {
			if _, v, ok := strings.Cut(name, ":"); ok {
				return strings.TrimSpace(v)
			}
		}
	}
	return "unknown CPU"
}

// redisVersion runs redis-server --version and returns the version and
// the binary's path.
func redisVersion() string {
	bin, err := redistest.Binary()
	if err != nil {
		return "not found"
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "unknown (" + bin + ")"
	}
	for field := range strings.FieldsSeq(string(out)) {
		if v, ok := strings.CutPrefix(field, "v="); ok {
			return v + " (" + bin + ")"
		}
	}
	return strings.TrimSpace(string(out))
}

// startServers starts n redis-servers at once.
func startServers(ctx context.Context, n int) ([]*redistest.Server, error) {
	servers := make([]*redistest.Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Go(func() { servers[i], errs[i] = redistest.StartServer(ctx) })
	}
	wg.Wait()
	started := servers[:0]
	for _, s := range servers {
		if s != nil {
			started = append(started, s)
		}
	}
	return started, errors.Join(errs...)
}

// measureOne opens a fresh instance (or, for contended-multi, one per
// contender) of sys over addrs, measures mode for d, closes everything and
// checks that no goroutine outlived the instances. In a degraded mode it
// fails herald for the measurement (see measureDegraded) and brings it
// back before closing; restoreErr says that bringing it back failed, which
// leaves the servers unfit for further measurements.
func measureOne(ctx context.Context, sys systems.System, mode string, addrs []string, herald *redistest.Server, d time.Duration, prefix string) (rec report.Record, restoreErr error) {
	rec = report.Record{Mode: mode, System: sys.Name, Started: time.Now()}
	before := runtime.NumGoroutine()
	defer func() { rec.Took = time.Since(rec.Started) }()

	fault := report.Fault(mode)
	if fault != "" && herald == nil {
		rec.Error = "degraded mode without a herald to fail"
		return rec, nil
	}
	count := 1
	if mode == report.ContendedMulti {
		count = contenders
	}
	insts, err := openInstances(sys, addrs, count, fault != "")
	if err != nil {
		rec.Error = "open: " + err.Error()
		return rec, nil
	}
	wd := measure.Watchdog{Stop: ctx, Abort: insts.close}

	switch mode {
	case report.Uncontended, report.Parallel:
		err = measureThroughput(wd, insts.list[0], mode, d, prefix, &rec)
	case report.ContendedShared, report.ContendedMulti:
		err = measureContended(wd, insts.list, d, prefix, &rec)
	default:
		var injected bool
		injected, err = measureDegraded(wd, insts.list[0], mode, herald, d, prefix, &rec)
		if injected {
			if rerr := restore(ctx, fault, herald); rerr != nil {
				restoreErr = fmt.Errorf("bringing the herald %s back: %w", herald.Addr(), rerr)
				err = errors.Join(err, restoreErr)
			}
		}
	}
	if err != nil && rec.Error == "" {
		rec.Error = err.Error()
	}
	insts.close()
	if insts.err != nil {
		rec.CloseError = insts.err.Error()
	}
	rec.LeakedGoroutines = leaked(before)
	return rec, restoreErr
}

// instances are the instances of one measurement. close closes them all,
// once, whoever calls it first (the measurement, or the watchdog to end a
// hang), and keeps the error in err.
type instances struct {
	list []systems.Instance
	once sync.Once
	err  error
}

func (is *instances) close() {
	is.once.Do(func() {
		var errs []error
		for _, inst := range is.list {
			errs = append(errs, inst.Close())
		}
		is.err = errors.Join(errs...)
	})
}

// openInstances opens count instances of sys over addrs (degraded: for a
// degraded mode). On an error it closes those it opened.
func openInstances(sys systems.System, addrs []string, count int, degraded bool) (*instances, error) {
	is := &instances{}
	for range count {
		inst, err := sys.OpenFor(addrs, degraded)
		if err != nil {
			is.close()
			return nil, err
		}
		is.list = append(is.list, inst)
	}
	return is, nil
}

// measureThroughput measures the uncontended or the parallel mode on inst:
// a warm-up, then RunThroughput, recorded in rec.
func measureThroughput(wd measure.Watchdog, inst systems.Instance, mode string, d time.Duration, prefix string, rec *report.Record) error {
	workers := 1
	if mode == report.Parallel {
		workers = parallelWorkers
	}
	if err := measure.Warmup(wd, inst, workers, 50, prefix+"warmup:"); err != nil {
		rec.Error = "warm-up: " + err.Error()
		return err
	}
	t, err := measure.RunThroughput(wd, inst, workers, d, 0, prefix)
	rec.Throughput = &t
	return err
}

// measureContended measures a contended mode: contenders goroutines on one
// key, spread over insts (one shared instance, or one each), recorded in
// rec.
func measureContended(wd measure.Watchdog, insts []systems.Instance, d time.Duration, prefix string, rec *report.Record) error {
	key := prefix + "contended"
	acquirers := make([]systems.Acquirer, contenders)
	for i := range acquirers {
		acquirers[i] = insts[i%len(insts)].Contender(key)
	}
	c, err := measure.RunContention(wd, acquirers, d, 0)
	rec.Contention = &c
	return err
}

// measureDegraded measures a degraded mode on inst: a healthy warm-up of
// WarmupOps operations, which opens the clients' connections to every
// server as a running process has them, then the fault on herald (hung or
// dead), then a warm-up of measure.DegradedWarmup with the fault in place
// (uncontended operations for the uncontended modes, the contenders on a
// key of their own for the contended ones), untimed, so that the system
// has noticed the failed server; then the measurement of the healthy mode
// it mirrors (uncontended, or contended-shared), every operation bounded
// by measure.DegradedOpTimeout. It reports whether it injected the fault,
// which the caller must then undo.
func measureDegraded(wd measure.Watchdog, inst systems.Instance, mode string, herald *redistest.Server, d time.Duration, prefix string, rec *report.Record) (injected bool, err error) {
	contended := report.Contended(mode)
	workers := 1
	if contended {
		workers = contenders
	}
	if err := measure.Warmup(wd, inst, workers, measure.WarmupOps, prefix+"warmup:"); err != nil {
		return false, err
	}
	if err := inject(report.Fault(mode), herald); err != nil {
		return false, fmt.Errorf("making the herald %s %s: %w", herald.Addr(), report.Fault(mode), err)
	}
	if !contended {
		// RunThroughput warms up for DegradedWarmup itself when its
		// operations are bounded.
		t, err := measure.RunThroughput(wd, inst, 1, d, measure.DegradedOpTimeout, prefix)
		rec.Throughput = &t
		return true, err
	}
	contend := func(key string) []systems.Acquirer {
		acquirers := make([]systems.Acquirer, contenders)
		for i := range acquirers {
			acquirers[i] = inst.Contender(key)
		}
		return acquirers
	}
	w, err := measure.RunContention(wd, contend(prefix+"warm-contended"), measure.DegradedWarmup, measure.DegradedOpTimeout)
	switch {
	case err != nil:
		return true, fmt.Errorf("warm-up: %w", err)
	case w.Violations > 0 || w.Hung > 0:
		return true, fmt.Errorf("warm-up: %d violations, %d contenders hung", w.Violations, w.Hung)
	}
	c, err := measure.RunContention(wd, contend(prefix+"contended"), d, measure.DegradedOpTimeout)
	rec.Contention = &c
	return true, err
}

// leaked waits up to leakGrace for the goroutine count to come back to
// before, and returns by how much it still exceeds it.
func leaked(before int) int {
	deadline := time.Now().Add(leakGrace)
	for {
		extra := runtime.NumGoroutine() - before
		if extra <= 0 {
			return 0
		}
		if time.Now().After(deadline) {
			return extra
		}
		time.Sleep(10 * time.Millisecond) // polling the count: nothing to wait on
	}
}

// notes are the lines printed under each mode's table; heralds are the
// herald's address by node count, for the degraded modes.
func notes(s settings, heralds map[int]string) map[string][]string {
	contended := []string{
		"16 goroutines take one key in turn for " + s.duration.String() + ": acquire (bounded by 30s), an empty critical section, release.",
		"acq/s: acquisitions granted within the window. hand-off: from the return of release k to the return of acquire k+1 (negative when k+1 returned first).",
		"wait: the Acquire time of acquisitions that took the lock over from another goroutine. releaser share: fraction of acquisitions won by the goroutine that held the lock just before.",
		"violations: acquisitions that returned while another goroutine held the lock. failures: acquisitions that returned an error (those cancelled at the end of the window excluded).",
		"redislock (bsm) retries with RetryStrategy LinearBackoff(10ms) in the contended modes (its default is no retry). redsync keeps its defaults: 32 tries 50–250 ms apart, so an Acquire gives up after about 5 s (a failure).",
	}
	var herald []string
	for _, n := range s.nodes {
		if a, ok := heralds[n]; ok {
			herald = append(herald, fmt.Sprintf("N=%d %s", n, a))
		}
	}
	degraded := []string{
		fmt.Sprintf("Measured at N≥%d only. The failed server is quorumlock's herald, the node that carries release notices and the wait queue: of the N servers, the one whose address sorts first as a string (quorumlock orders its nodes by name, and names a node by its address); here %s. The other systems fail the same server.",
			report.DegradedMinNodes, strings.Join(herald, ", ")),
		fmt.Sprintf("Each measurement opens fresh instances, warms them up healthy (%d operations: connections to every server open), fails the herald, warms up again for %v with the herald failed, untimed, so that the system has noticed it, and only then starts the clock. The herald is brought back before the instances close: a hung one continued (SIGCONT), a dead one restarted on its port, waited for until it answers and adopted for quorumlock's restart guard.",
			measure.WarmupOps, measure.DegradedWarmup),
		fmt.Sprintf("Every acquire and release is bounded by a context deadline of %v (acquisitions of the contended modes by 30s, as in contended-shared), so a system that waits out a hung server records failures, and at worst 0 per second, instead of hanging. The floors bound each call to a node by %v (quorumlock's default node timeout) in these modes, and still wait for every node each round; quorumlock and redsync keep their defaults.",
			measure.DegradedOpTimeout, systems.NodeTimeout),
	}
	uncontended := []string{
		"One goroutine acquires and releases a fresh key, again and again, for " + s.duration.String() + " after a 50-operation warm-up. p50/p99: acquire plus release; acquire p50/p99: the acquire alone.",
		"allocs/op and B/op: the whole process's heap allocations during the measurement (runtime.MemStats, after runtime.GC) divided by operations, the clients' own goroutines included.",
	}
	hung := "hung: the herald is stopped with SIGSTOP for the whole measurement: it keeps its connections open and answers nothing, as a server stalled by the OS or a network that drops packets."
	dead := "dead: the herald is shut down for the whole measurement: its connections are refused."
	degradedUncontended := append([]string{
		"As uncontended: one goroutine on fresh keys, the same figures. errors: operations that failed (each acquire and release bounded as below); they count neither in ops/s nor in the latencies. allocs/op include the bounding contexts.",
	}, degraded...)
	degradedContended := append([]string{
		"As contended-shared: one instance shared by 16 goroutines, the same figures; each release bounded as below.",
	}, degraded...)
	return map[string][]string{
		report.Uncontended: uncontended,
		report.Parallel: {
			fmt.Sprintf("%d goroutines, each on fresh keys of its own, share one instance (one client per server) for %s. ops/s is their total; p50/p99 of acquire plus release, acquire p50/p99 of the acquire alone; allocations as in the uncontended table.", parallelWorkers, s.duration),
		},
		report.ContendedShared: append([]string{
			"One instance shared by all goroutines: one quorumlock Locker, one redsync instance (a Mutex per goroutine on the same key), one rueidislock Locker, one redislock client.",
		}, contended...),
		report.ContendedMulti: append([]string{
			"Each goroutine has its own instance and its own clients, as 16 processes would.",
		}, contended...),
		report.HungUncontended: append([]string{hung}, degradedUncontended...),
		report.DeadUncontended: append([]string{dead}, degradedUncontended...),
		report.HungContended:   append(append([]string{hung}, degradedContended...), contended...),
		report.DeadContended:   append(append([]string{dead}, degradedContended...), contended...),
	}
}

// progress is the one-line summary of a record for standard error.
func progress(rec report.Record) string {
	switch {
	case rec.Error != "":
		return "ERROR " + rec.Error
	case rec.Throughput != nil:
		t := rec.Throughput
		return fmt.Sprintf("%8.0f ops/s  p50 %-10s p99 %-10s acquire p99 %-10s %6.1f allocs/op errors %d",
			t.OpsPerSec, t.P50, t.P99, t.AcquireP99, t.AllocsPerOp, t.Errors)
	case rec.Contention != nil:
		c := rec.Contention
		return fmt.Sprintf("%8.0f acq/s  hand-off p50 %-10s wait p99 %-10s share %.2f viol %d fail %d",
			c.AcqPerSec, c.HandoffP50, c.WaitP99, c.ReleaserShare, c.Violations, c.Failures)
	}
	return ""
}
