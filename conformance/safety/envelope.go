package safety

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
)

// The safety envelope: where Redlock's guarantee ends, measured. Three
// servers; node 0's clock runs fast (libfaketime), so a key expires early
// there. In each trial a holder takes a key on nodes 0 and 1 (another
// client holds it on node 2, and releases it just after), checks its validity,
// may pause (a held goroutine: a GC pause, swap), and then uses the
// protected resource: it writes a register, and goes on writing it every
// 2 ms while its lock says it is valid. A successor asks for the key every
// millisecond from shortly before node 0's copy is due to expire, and
// writes the register once it is granted (nodes 0 and 2 suffice). The
// register is the judge: a write of the holder accepted after one of its
// successor is a violation, a lost update that neither client saw.
// Fenced, the register refuses a token below the highest it has accepted
// (docs/fencing.md).
//
// Theory: without fencing, violations begin where node 0's copy expires
// (TTL / rate of real time) before the holder's validity ends
// (TTL - drift, drift = TTL x 1% + 2 ms), that is at a rate above
// TTL / (TTL - drift), or where the pause outlasts that copy; with fencing
// never.

// DefaultRates are the fast server's clock rates of an envelope sweep.
var DefaultRates = []float64{1, 1.005, 1.01, 1.02, 1.05}

// EnvelopeConfig is one sweep of the safety envelope.
type EnvelopeConfig struct {
	Rates []float64 // node 0's clock rates, each in [1, 2]; default DefaultRates
	// Pauses of the holder between its validity check and its first
	// write; default 0, TTL/2 and 3 TTL/2.
	Pauses []time.Duration
	TTL    time.Duration // default 2 s, at least 200 ms
	Trials int           // trials per cell (rate, pause, fencing); default 10
	// Stagger separates the starts of a rate's trials, which otherwise run
	// at once; default 20 ms.
	Stagger time.Duration
	// NewNode makes a node of the backend under test for a server's
	// address (required).
	NewNode redistest.NodeFactory
	// Logf, when set, receives a line per rate as it ends.
	Logf func(format string, args ...any)
}

func (c *EnvelopeConfig) defaults() error {
	if c.NewNode == nil {
		return errors.New("safety: EnvelopeConfig.NewNode is nil")
	}
	if c.TTL == 0 {
		c.TTL = 2 * time.Second
	}
	if c.TTL < 200*time.Millisecond {
		return fmt.Errorf("safety: envelope TTL %v is below 200 ms", c.TTL)
	}
	if len(c.Rates) == 0 {
		c.Rates = DefaultRates
	}
	for _, r := range c.Rates {
		if !(r >= 1 && r <= 2) {
			return fmt.Errorf("safety: envelope clock rate %v is not in [1, 2]", r)
		}
	}
	if len(c.Pauses) == 0 {
		c.Pauses = []time.Duration{0, c.TTL / 2, c.TTL * 3 / 2}
	}
	for _, p := range c.Pauses {
		if p < 0 || p > 10*c.TTL {
			return fmt.Errorf("safety: envelope pause %v is not in [0, 10 TTL]", p)
		}
	}
	if c.Trials <= 0 {
		c.Trials = 10
	}
	if c.Stagger <= 0 {
		c.Stagger = 20 * time.Millisecond
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return nil
}

// Envelope is what a sweep measured.
type Envelope struct {
	TTL   time.Duration
	Drift time.Duration // core's drift allowance for TTL (Locker.Drift)
	// Limit is the fastest clock rate of node 0 that the drift allowance
	// covers, TTL / (TTL - Drift).
	Limit   float64
	Pauses  []time.Duration
	Trials  int
	Rows    []EnvelopeRow
	Elapsed time.Duration
}

// EnvelopeRow is one clock rate of node 0.
type EnvelopeRow struct {
	Rate float64
	// Expiry is how long a key set with PX TTL lived on node 0, in real
	// time (the least of three measurements).
	Expiry time.Duration
	// ValidFor and SuccessorAt are medians over the trials without pause
	// or fencing: the holder's validity when granted, and when its
	// successor was granted; both from the holder's grant.
	ValidFor, SuccessorAt time.Duration
	Cells                 []Cell // by pause, unfenced before fenced
}

// Cell is what the trials of one rate, pause and fencing saw.
type Cell struct {
	Pause  time.Duration
	Fenced bool
	Trials int // trials that ran
	// Violations counts trials whose register accepted a write of the
	// holder after one of its successor.
	Violations int
	// DoubleHolds counts trials whose successor was granted the lock before
	// the holder's validity ended (the holder releases only after it).
	DoubleHolds int
	Refused     int // the holder's writes a fenced register refused
	// Skipped counts trials that could not be set up (the holder was not
	// granted, or its successor never was), with the first reason.
	Skipped    int
	SkipReason string
	Predicted  bool // theory predicts violations (Envelope.Predict)

	validFor, successorAt []time.Duration
}

// Predict says whether theory predicts violations for node 0's clock rate,
// a pause and fencing: without fencing, when node 0's copy of the key
// expires (TTL / rate) before the holder's validity ends (TTL - Drift) or
// before its pause does; with fencing never.
func (e *Envelope) Predict(rate float64, pause time.Duration, fenced bool) bool {
	if fenced {
		return false
	}
	expiry := time.Duration(float64(e.TTL) / rate)
	return expiry < e.TTL-e.Drift || pause > expiry
}

// RunEnvelope sweeps cfg's clock rates, pauses and fencing, each rate on
// three fresh servers (node 0 under libfaketime, even at rate 1, so that
// every row runs the same machinery). It returns ErrNoFaketime without
// libfaketime.
func RunEnvelope(ctx context.Context, cfg EnvelopeConfig) (*Envelope, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if _, err := FaketimeEnv(1); err != nil {
		return nil, err
	}
	start := time.Now()
	env := &Envelope{TTL: cfg.TTL, Pauses: cfg.Pauses, Trials: cfg.Trials}
	for _, rate := range cfg.Rates {
		row, err := runRate(ctx, cfg, env, rate)
		if err != nil {
			return nil, fmt.Errorf("safety: envelope at x%v: %w", rate, err)
		}
		env.Rows = append(env.Rows, *row)
		cfg.Logf("x%-6v key of PX %v lived %v; %v", rate, cfg.TTL, row.Expiry.Round(100*time.Microsecond), row.Cells)
	}
	env.Elapsed = time.Since(start)
	return env, nil
}

func (c Cell) String() string {
	f := ""
	if c.Fenced {
		f = " fenced"
	}
	return fmt.Sprintf("pause %v%s: %d/%d (held twice in %d)", c.Pause, f, c.Violations, c.Trials, c.DoubleHolds)
}

// envelopeRig is one rate's servers and Lockers.
type envelopeRig struct {
	servers []*redistest.Server
	third   *redis.Client // an admin client of node 2
	// lockers[fenced][role]: role 0 holds, role 1 succeeds.
	lockers [2][2]*core.Locker
	closers []func() error
}

func startEnvelopeRig(ctx context.Context, cfg EnvelopeConfig, rate float64) (*envelopeRig, error) {
	r := &envelopeRig{}
	fast, err := StartFastServer(ctx, rate)
	if err != nil {
		return nil, err
	}
	r.servers = append(r.servers, fast)
	for range 2 {
		s, err := redistest.StartServer(ctx)
		if err != nil {
			return nil, errors.Join(err, r.close())
		}
		r.servers = append(r.servers, s)
	}
	r.third = redis.NewClient(&redis.Options{Addr: r.servers[2].Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	for fenced := range 2 {
		for role := range 2 {
			if r.lockers[fenced][role], err = r.newLocker(cfg, fenced == 1); err != nil {
				return nil, errors.Join(err, r.close())
			}
		}
	}
	return r, nil
}

func (r *envelopeRig) newLocker(cfg EnvelopeConfig, fenced bool) (*core.Locker, error) {
	nodes := make([]core.Node, len(r.servers))
	for i, s := range r.servers {
		n, closeClient, err := cfg.NewNode(s.Addr())
		if closeClient != nil {
			r.closers = append(r.closers, closeClient)
		}
		if err != nil {
			return nil, err
		}
		nodes[i] = n
	}
	// A node timeout of TTL/5: on a loaded machine a holder that times out
	// on node 0 or 1 is not granted, and its trial is lost.
	l, err := core.New(nodes, core.WithTTL(cfg.TTL), core.WithNodeTimeout(cfg.TTL/5), core.WithFencing(fenced))
	if err != nil {
		return nil, err
	}
	r.closers = append([]func() error{l.Close}, r.closers...) // before its nodes' clients
	return l, nil
}

func (r *envelopeRig) close() error {
	var errs []error
	for _, c := range r.closers {
		errs = append(errs, c())
	}
	if r.third != nil {
		errs = append(errs, r.third.Close())
	}
	for _, s := range r.servers {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// measureExpiry is MeasureExpiry on addr three times at once, the least.
func measureExpiry(ctx context.Context, addr string, ttl time.Duration) (time.Duration, error) {
	var wg sync.WaitGroup
	var lived [3]time.Duration
	var errs [3]error
	for i := range lived {
		wg.Go(func() { lived[i], errs[i] = MeasureExpiry(ctx, addr, ttl) })
	}
	wg.Wait()
	return slices.Min(lived[:]), errors.Join(errs[:]...)
}

// runRate runs every cell's trials at one rate of node 0, on a rig of
// its own.
func runRate(ctx context.Context, cfg EnvelopeConfig, env *Envelope, rate float64) (row *EnvelopeRow, err error) {
	rig, err := startEnvelopeRig(ctx, cfg, rate)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, rig.close()) }()
	row = &EnvelopeRow{Rate: rate}
	if row.Expiry, err = measureExpiry(ctx, rig.servers[0].Addr(), cfg.TTL); err != nil {
		return nil, err
	}
	env.Drift = rig.lockers[0][0].Drift()
	env.Limit = float64(cfg.TTL) / float64(cfg.TTL-env.Drift)
	for _, p := range cfg.Pauses {
		for _, fenced := range []bool{false, true} {
			row.Cells = append(row.Cells, Cell{Pause: p, Fenced: fenced, Predicted: env.Predict(rate, p, fenced)})
		}
	}
	if err := runTrials(ctx, cfg, rig, row); err != nil {
		return nil, err
	}
	row.ValidFor, row.SuccessorAt = median(row.Cells[0].validFor), median(row.Cells[0].successorAt)
	return row, nil
}

// runTrials runs cfg.Trials trials of each cell of row, all at once,
// their starts staggered and interleaved across cells, each on a key of
// its own.
func runTrials(ctx context.Context, cfg EnvelopeConfig, rig *envelopeRig, row *EnvelopeRow) error {
	var mu sync.Mutex // guards row.Cells and errs
	var wg sync.WaitGroup
	var errs []error
	base := time.Now()
	clock := func() time.Duration { return time.Since(base) }
	for j := range cfg.Trials {
		for i := range row.Cells {
			c := &row.Cells[i]
			f := map[bool]int{false: 0, true: 1}[c.Fenced]
			t := &trial{
				key: fmt.Sprintf("envelope:%d:%d:%d", base.UnixNano(), i, j), pause: c.Pause, ttl: cfg.TTL,
				pollFrom: time.Duration(float64(cfg.TTL)/row.Rate) - cfg.TTL/25,
				holder:   rig.lockers[f][0], successor: rig.lockers[f][1], third: rig.third,
				reg: &register{fenced: c.Fenced}, clock: clock,
			}
			at := time.Duration(j*len(row.Cells)+i) * cfg.Stagger
			wg.Go(func() {
				if waitCtx(ctx, at) != nil {
					return
				}
				o, err := t.run(ctx)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				c.add(o)
			})
		}
	}
	wg.Wait()
	return errors.Join(append(errs, ctx.Err())...)
}

func (c *Cell) add(o outcome) {
	if o.skipped != "" {
		c.Skipped++
		if c.SkipReason == "" {
			c.SkipReason = o.skipped
		}
		return
	}
	c.Trials++
	if o.violation {
		c.Violations++
	}
	if o.doubleHold {
		c.DoubleHolds++
	}
	c.Refused += o.refused
	c.validFor = append(c.validFor, o.validFor)
	c.successorAt = append(c.successorAt, o.successorAt)
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(d))
	return s[len(s)/2]
}

// Table renders the envelope as a Markdown table: a row per clock rate of
// node 0, with the real lifetime of a key of PX TTL there, the median
// holder's validity and successor's grant (no pause, no fencing), and a
// column per pause and fencing: violations / trials, in bold where theory
// predicts violations, with the writes a fenced register refused and the
// trials that could not be set up.
func (e *Envelope) Table() string {
	var b strings.Builder
	b.WriteString("| node 0's clock | key of PX " + e.TTL.String() + " lived | holder valid for / successor granted at |")
	for _, p := range e.Pauses {
		name := "no pause"
		if p > 0 {
			name = "pause " + p.String()
		}
		fmt.Fprintf(&b, " %s | %s, fenced |", name, name)
	}
	b.WriteString("\n|---|---|---|" + strings.Repeat("---|", 2*len(e.Pauses)) + "\n")
	for _, r := range e.Rows {
		fmt.Fprintf(&b, "| x%v | %s | %s / %s |", r.Rate, ms(r.Expiry), ms(r.ValidFor), ms(r.SuccessorAt))
		for _, c := range r.Cells {
			s := fmt.Sprintf("%d/%d", c.Violations, c.Trials)
			if c.Predicted {
				s = "**" + s + "**"
			}
			if c.Refused > 0 {
				s += fmt.Sprintf(", %d writes refused", c.Refused)
			}
			if c.Skipped > 0 {
				s += fmt.Sprintf(" (%d not set up)", c.Skipped)
			}
			b.WriteString(" " + s + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + " ms"
}

// nearLimit is how close node 0's expiry may come to the end of the
// holder's validity for a cell to be too close to call: a holder
// descheduled for a few milliseconds between its Validity check and its
// write crosses it (x1.01 at a TTL of 2 s is 2.2 ms inside the limit).
const nearLimit = 5 * time.Millisecond

// Surprises lists the cells whose measurement contradicts Predict:
// violations where none are predicted (a breach of the guarantee, or a
// pause of the measuring process itself), and cells where no trial ran,
// except those within nearLimit of the drift allowance's limit; and cells
// predicted to break that showed no violation (the sweep missed it).
func (e *Envelope) Surprises() (unpredicted, missed []string) {
	for _, r := range e.Rows {
		margin := time.Duration(float64(e.TTL)/r.Rate) - (e.TTL - e.Drift)
		for _, c := range r.Cells {
			at := fmt.Sprintf("x%v %v", r.Rate, c)
			switch {
			case c.Trials == 0:
				unpredicted = append(unpredicted, at+": no trial ran")
			case c.Violations > 0 && !c.Predicted && !c.Fenced && margin.Abs() < nearLimit:
				// too close to call: reported in the table, not a failure
			case c.Violations > 0 && !c.Predicted:
				unpredicted = append(unpredicted, at)
			case c.Violations == 0 && c.Predicted:
				missed = append(missed, at)
			}
		}
	}
	return unpredicted, missed
}
