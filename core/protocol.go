package core

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/core/driver"
	"github.com/quorumlock/quorumlock/strategies"
)

// This file is the lock protocol: every byte sent to a node is decided
// here. A lock kind (lockKind) says what a lock on its keys sends; the
// rest of core sends it without knowing which kind it is. The scheme and
// its scripts: docs/design.md.

// request is one call of the protocol to a node: a script with its keys
// and arguments, or (setNX) SET keys[0] to the first argument NX PX with
// the TTL. Its arguments are held inline: a request is one allocation at
// most.
type request struct {
	script driver.Script
	setNX  bool
	argc   uint8
	keys   []string
	argv   [maxArgs]string
}

// maxArgs is the most arguments a request has.
const maxArgs = 6

// newRequest returns the request of script s with keys and args.
func newRequest(s driver.Script, keys []string, args ...string) request {
	r := request{script: s, keys: keys, argc: uint8(len(args))}
	copy(r.argv[:], args)
	return r
}

// args returns r's arguments.
func (r *request) args() []string { return r.argv[:r.argc] }

// lockKind is what one kind of lock sends to a node: its grant, extend,
// release, withdraw and raise requests. Rounds, validity, identity, node health,
// the hand-off and the keeper use it without knowing the kind, and read
// every answer as answerOf and grantCall do (docs/design.md, lock kinds).
// mutex is the first kind.
type lockKind interface {
	// stored names the lock as stored: its key with the key prefix.
	stored() string
	// queue is the key of its wait queue on the herald, "" if it has none.
	queue() string
	// shares reports whether locks of the kind hold a key together, so
	// that their waiters are handed it together (driver.ReaderTicket).
	shares() bool
	// fenced reports whether a grant answers with a fencing counter,
	// which raise brings to the token on a quorum (fencing.go).
	fenced() bool
	// raise returns the request that raises its fencing counters to token.
	raise(token string) request
	// grant returns the requests that acquire value on a node, without
	// and with the restart guard; handed says the round was woken by its
	// own ticket: the lock was handed to it.
	grant(value string, handed bool) (plain, guarded request)
	// extend returns the request that resets value's TTL on a node.
	extend(value string) request
	// release returns the request that deletes value on a node; on the
	// herald (herald true) it also hands the lock to the oldest waiter.
	release(value string, herald bool) request
	// withdraw returns the request that cleans up after a lost round:
	// release's, and for the mutex also the mark that a writer waits
	// behind shared holders (docs/design.md, shared locks).
	withdraw(value string, herald bool) request
}

// mutex is the plain lock: one key, set to the holder's value with SET NX
// PX (or a script, with fencing or the restart guard), as redsync and
// node-redlock set it.
type mutex struct {
	rkey, qkey, fenceKey   string
	notify                 string // the herald's release hands over on its ReleaseChannel: rkey, or a permit's semaphore
	ttl, guardMillis, mark string // in milliseconds, for the scripts
	// names backs the requests' keys: rkey and qkey (the herald's release,
	// or rkey alone), rkey and fenceKey (the fenced grant), rkey, BirthKey
	// and fenceKey (the guarded grant, without fenceKey when not fenced).
	names [7]string
}

// newMutex returns the mutex on key, or refuses a key the protocol cannot
// use.
func (l *Locker) newMutex(key string) (*mutex, error) {
	rkey, fence, err := l.storedKeys(key)
	if err != nil {
		return nil, err
	}
	// A key whose queue cannot share its cluster slot has none: waiters poll.
	q, ok := driver.QueueKey(rkey)
	if !ok {
		q = ""
	}
	return l.mutexOn(rkey, q, rkey, fence), nil
}

// mutexOn returns the mutex on the stored key rkey with the wait queue
// qkey ("" for none), handing over on notify's ReleaseChannel, fenced by
// the counter fence ("" for none).
func (l *Locker) mutexOn(rkey, qkey, notify, fence string) *mutex {
	m := &mutex{rkey: rkey, qkey: qkey, notify: notify, fenceKey: fence, ttl: l.ttlMillis, guardMillis: l.guardMillis, mark: l.markMillis}
	m.names = [7]string{rkey, m.qkey, rkey, fence, rkey, driver.BirthKey, fence}
	return m
}

func (m *mutex) stored() string { return m.rkey }
func (m *mutex) queue() string  { return m.qkey }
func (m *mutex) fenced() bool   { return m.fenceKey != "" }
func (m *mutex) shares() bool   { return false }

func (m *mutex) raise(token string) request {
	return newRequest(driver.ScriptRaiseFence, m.names[3:4], token)
}

func (m *mutex) grant(value string, _ bool) (plain, guarded request) {
	guarded = newRequest(driver.ScriptAcquireGuarded, m.names[4:7], value, m.ttl, m.guardMillis)
	switch {
	case m.fenceKey == "":
		guarded.keys = m.names[4:6]
		plain = newRequest(0, m.names[:1], value)
		plain.setNX = true
	default:
		plain = newRequest(driver.ScriptAcquireFenced, m.names[2:4], value, m.ttl)
	}
	return plain, guarded
}

func (m *mutex) extend(value string) request {
	return newRequest(driver.ScriptExtend, m.names[:1], value, m.ttl)
}

func (m *mutex) release(value string, herald bool) request {
	if !herald || m.qkey == "" {
		return newRequest(driver.ScriptRelease, m.names[:1], value)
	}
	return newRequest(driver.ScriptRelease, m.names[:2], value, driver.ReleaseChannel(m.notify))
}

// withdraw is the release of a lost round, which also marks that a writer
// waits when shared holders hold the key. A key whose mark cannot share
// its slot (no shared lock can hold it either) gets the plain release.
func (m *mutex) withdraw(value string, herald bool) request {
	mark, ok := driver.WriterKey(m.rkey)
	if !ok {
		return m.release(value, herald)
	}
	if !herald || m.qkey == "" {
		return newRequest(driver.ScriptWithdraw, []string{m.rkey, mark}, value, m.mark)
	}
	return newRequest(driver.ScriptWithdraw, []string{m.rkey, mark, m.qkey}, value, m.mark, driver.ReleaseChannel(m.notify))
}

// send makes request r to node i and returns the reply: SET NX PX's as 1
// (set) or nil.
func (l *Locker) send(ctx context.Context, i int, r *request) (any, error) {
	if !r.setNX {
		return l.eval(ctx, i, r.script, r.keys, r.args())
	}
	set, err := l.nodes[i].SetNX(ctx, r.keys[0], r.argv[0], l.o.ttl)
	if err != nil || !set {
		return nil, err
	}
	return int64(1), nil
}

// grantCall is what an acquiring round asks node i: k's grant of value,
// guarded where the restart guard applies. A fenced grant's counters go
// to the returned slice; a young node's refusal is a restartGuardError.
func (l *Locker) grantCall(k lockKind, value string, handed bool) (nodeCall, []atomic.Int64) {
	var counters []atomic.Int64 // atomic: a suspect call may write after the round
	if k.fenced() {
		counters = make([]atomic.Int64, len(l.nodes))
	}
	st := new(struct{ plain, guarded request }) // one allocation
	st.plain, st.guarded = k.grant(value, handed)
	return func(ctx context.Context, i int) (bool, error) {
		r := &st.plain
		if l.guarded != nil && l.guarded[i] {
			r = &st.guarded
		}
		reply, err := l.send(ctx, i, r)
		if err != nil {
			return false, err
		}
		c, ok := reply.(int64)
		switch {
		case !ok && reply != nil:
			return false, fmt.Errorf("quorumlock: unexpected reply %#v to the %s script", reply, r.script.Name())
		case c < 0:
			return false, &restartGuardError{Age: time.Duration(-1-c) * time.Millisecond, MinAge: l.guardMin}
		case counters != nil:
			counters[i].Store(c)
		}
		return c > 0, nil
	}, counters
}

// newValue returns a lock value: ValueBytes random bytes, base64url encoded.
func newValue() string {
	var b [driver.ValueBytes]byte
	_, _ = rand.Read(b[:]) // never fails: it crashes the program instead
	var v [valueLen]byte   // on the stack: one allocation, the string's
	base64.RawURLEncoding.Encode(v[:], b[:])
	return string(v[:])
}

// valueLen is the length of a lock value: ValueBytes in base64 without padding.
const valueLen = (driver.ValueBytes*8 + 5) / 6

// millis formats a TTL for PX and PEXPIRE.
func millis(d time.Duration) string {
	return strconv.FormatInt(d.Milliseconds(), 10)
}

// eval runs s on node i: by SHA once the node is known to have it, else
// (and after NOSCRIPT) by source.
func (l *Locker) eval(ctx context.Context, i int, s driver.Script, keys, args []string) (any, error) {
	n := l.nodes[i]
	if l.loaded[i].Load()&bit(s) != 0 {
		reply, err := n.EvalSHA(ctx, s.SHA(), keys, args)
		if err == nil || n.Classify(err) != driver.KindNoScript {
			return reply, err
		}
		l.loaded[i].And(^bit(s))
	}
	reply, err := n.Eval(ctx, s.Source(), keys, args)
	if err == nil {
		l.loaded[i].Or(bit(s))
	}
	return reply, err
}

// sendBatch makes reqs (script requests all) to node i in one round trip:
// each by SHA once the node is known to have its script, else by source;
// those that met NOSCRIPT go again by source, in a second round trip. It
// returns each request's call, with its Reply and Err.
func (l *Locker) sendBatch(ctx context.Context, i int, b driver.Batcher, reqs []request) []driver.Call {
	calls := make([]driver.Call, len(reqs))
	loaded := l.loaded[i].Load()
	for j := range reqs {
		calls[j] = driver.Call{Keys: reqs[j].keys, Args: reqs[j].args()}
		if s := reqs[j].script; loaded&bit(s) != 0 {
			calls[j].SHA = s.SHA()
		} else {
			calls[j].Source = s.Source()
		}
	}
	b.EvalBatch(ctx, calls)
	var missing []int
	node := l.nodes[i]
	for j := range calls {
		if calls[j].Err != nil && node.Classify(calls[j].Err) == driver.KindNoScript {
			missing = append(missing, j)
			l.loaded[i].And(^bit(reqs[j].script))
		}
	}
	if len(missing) > 0 {
		again := make([]driver.Call, len(missing))
		for x, j := range missing {
			again[x] = driver.Call{Source: reqs[j].script.Source(), Keys: calls[j].Keys, Args: calls[j].Args}
		}
		b.EvalBatch(ctx, again)
		for x, j := range missing {
			calls[j] = again[x]
		}
	}
	var ran uint32
	for j := range calls {
		if calls[j].Err == nil {
			ran |= bit(reqs[j].script)
		}
	}
	l.loaded[i].Or(ran)
	return calls
}

// requestVote makes one of the compare-and-act requests to node i and
// reports whether the node said yes (see requestAnswer).
func (l *Locker) requestVote(ctx context.Context, i int, r *request) (bool, error) {
	a, err := l.requestAnswer(ctx, i, r)
	return a > 0, err
}

// requestAnswer makes one of the compare-and-act requests to node i and
// returns its answer (see answerOf). A node failure that leaves time on
// ctx is retried once; only a yes from the retry counts, else the first
// failure is returned (docs/design.md, running a script twice).
func (l *Locker) requestAnswer(ctx context.Context, i int, r *request) (int64, error) {
	a, err := l.requestAnswerOnce(ctx, i, r)
	if err == nil || ctx.Err() != nil || l.nodes[i].Classify(err) != driver.KindNodeFailure {
		return a, err
	}
	l.unverify(i) // a new connection: its yes waits for the identity check
	if again, err2 := l.requestAnswerOnce(ctx, i, r); err2 == nil && again > 0 {
		return again, nil
	}
	return 0, err
}

func (l *Locker) requestAnswerOnce(ctx context.Context, i int, r *request) (int64, error) {
	reply, err := l.send(ctx, i, r)
	if err != nil {
		return 0, err
	}
	return answerOf(r.script, reply)
}

// voteOf reads the reply of a compare-and-act script as a yes or a no.
func voteOf(s driver.Script, reply any) (bool, error) {
	a, err := answerOf(s, reply)
	return a > 0, err
}

// answerOf reads the reply of a compare-and-act script: 1 is yes, 0 or nil
// no, 2 (a release or a withdrawal, of any kind) yes and handed over,
// anything else an error.
func answerOf(s driver.Script, reply any) (int64, error) {
	switch v := reply.(type) {
	case int64:
		handsOver := s == driver.ScriptRelease || s == driver.ScriptReleaseAll || s == driver.ScriptReleaseShared || s == driver.ScriptWithdraw
		if v == 0 || v == 1 || (v == 2 && handsOver) {
			return v, nil
		}
	case nil:
		return 0, nil
	}
	return 0, fmt.Errorf("quorumlock: unexpected reply %#v to the %s script", reply, s.Name())
}

// bit is s's bit in Locker.loaded.
func bit(s driver.Script) uint32 { return 1 << s }

// nodeCall is what node i is asked in a round; it reports the node's vote.
type nodeCall func(ctx context.Context, i int) (bool, error)

// releaseStrategy sends releases: to every node at once, waiting for every
// answer (Redlock rule 6).
var releaseStrategy = strategies.Parallel()

// askNodes makes one round: it runs call on the nodes under strategy s
// and returns every node's result. The strategy only orders the calls; the votes are counted here.
// A suspect node is asked in the background, and waited for only while
// the round's outcome is open (suspectCalls).
func (l *Locker) askNodes(ctx context.Context, s strategies.Strategy, call nodeCall) []NodeResult {
	return l.askNodesOwing(ctx, s, call, nil, nil)
}

// owing is a release round's: which nodes need the call at all, and what
// a suspect node is owed when it cannot be asked or does not answer.
type owing struct {
	rel     owedRelease
	skipped uint64       // nodes never sent the acquisition
	prev    []NodeResult // an earlier release round's results
}

// notSent is the result of a release to a node never sent the
// acquisition: nothing to release there, and not asked.
var notSent = NodeResult{Outcome: OutcomeNotTried}

// known returns node i's result when the release need not ask it: it was
// never sent the acquisition, or it answered an earlier release. Else nil.
func (o *owing) known(i int) *NodeResult {
	switch {
	case i < 64 && o.skipped&(1<<i) != 0:
		return &notSent
	case o.prev != nil && (o.prev[i].Outcome == OutcomeOK || o.prev[i].Outcome == OutcomeRefused):
		return &o.prev[i]
	}
	return nil
}

// askNodesOwing is askNodes, but with results known before it asks (known(i)
// not nil: node i is not asked, and that is its result), and for a
// release (o not nil) what o says. A release that a suspect node cannot
// be sent at once, or does not answer, is owed to it.
func (l *Locker) askNodesOwing(ctx context.Context, s strategies.Strategy, call nodeCall, known func(i int) *NodeResult, o *owing) []NodeResult {
	n := len(l.nodes)
	st := new(roundState) // one allocation for up to smallRound nodes
	results, verdicts := st.results[:], st.verdicts[:]
	if n <= smallRound {
		results, verdicts = results[:n:n], verdicts[:n:n]
	} else {
		results, verdicts = make([]NodeResult, n), make([]strategies.Result, n)
	}
	var rel *owedRelease
	var start time.Time // a release's: bounds its wait for owed releases
	if o != nil {
		known, rel, start = o.known, &o.rel, l.o.clock.Now()
	}
	bg := &st.background
	s.Run(ctx, strategies.Round{
		Nodes:   n,
		Quorum:  l.o.quorum,
		Timeout: l.o.nodeTimeout,
		Attempt: func(actx context.Context, i int) bool {
			if known != nil {
				if r := known(i); r != nil {
					results[i] = *r
					return r.Outcome == OutcomeOK
				}
			}
			if l.suspect.is(i) && bg.start(ctx, l, i, call, rel, &results[i]) {
				return false
			}
			ok := l.attempt(ctx, actx, i, call, &results[i])
			if rel != nil && !reached(&results[i]) {
				// A release lost on the way (the node hung or dropped the
				// connection just now) is owed too: it may never have
				// been written.
				l.health.owe(i, *rel, nil)
			}
			return ok
		},
	}, verdicts)
	bg.await(ctx, l.o.clock, l.o.quorum, results, start.Add(l.o.nodeTimeout))
	for i := range results {
		results[i].Index = i
		results[i].Node = l.names[i]
	}
	return results
}

// smallRound is the number of nodes up to which a round's state is one
// allocation (roundState).
const smallRound = 5

// roundState is a round's results, the strategy's verdicts and the
// suspect calls, for up to smallRound nodes.
type roundState struct {
	results    [smallRound]NodeResult
	verdicts   [smallRound]strategies.Result
	background suspectCalls
}

// attempt asks node i once, under actx (the caller's ctx bounded by the
// node timeout), records the answer in res and reports whether it is a
// vote for.
func (l *Locker) attempt(ctx, actx context.Context, i int, call nodeCall, res *NodeResult) bool {
	start := l.o.clock.Now()
	ok, err := l.checkedCall(actx, i, call) // one server, one vote (identity.go)
	res.Latency = l.o.clock.Now().Sub(start)
	// A passed deadline counts before its timer fires: a driver's socket
	// deadline can beat it (docs/design.md, each node's outcome).
	var cut, timedOut bool
	if err != nil {
		cut = ctx.Err() != nil || errors.Is(actx.Err(), context.Canceled) || deadlinePassed(ctx)
		timedOut = actx.Err() != nil || deadlinePassed(actx)
	}
	res.Outcome, res.Err = l.outcome(i, ok, err, cut, timedOut, l.o.nodeTimeout)
	return res.Outcome == OutcomeOK
}

// checkedCall runs call on node i under the identity rule: a known
// duplicate is checked again first, a failure marks the node unverified,
// and a yes counts only from a node checked since its last failure.
func (l *Locker) checkedCall(ctx context.Context, i int, call nodeCall) (bool, error) {
	// precheck and confirm, inlined: this runs on every node call.
	st := &l.ident.state[i]
	if s := st.Load(); s&stateBits == duplicate {
		if err := l.identify(ctx, i, s); err != nil {
			return false, err
		}
	}
	ok, err := call(ctx, i)
	if err != nil {
		l.unverify(i)
		return ok, err
	}
	if s := st.Load(); ok && s&stateBits != verified {
		if err := l.identify(ctx, i, s); err != nil {
			return false, err
		}
	}
	return ok, nil
}

// outcome classifies one node's answer to a call bounded by the node
// timeout: cut says the call was cut off from outside (by the caller or
// the strategy), timedOut that its own deadline passed. A timeout or a
// lost connection makes the node suspect.
func (l *Locker) outcome(i int, ok bool, err error, cut, timedOut bool, timeout time.Duration) (Outcome, error) {
	node := l.nodes[i]
	switch {
	case err == nil && ok:
		return OutcomeOK, nil
	case err == nil:
		return OutcomeRefused, nil
	case cut:
		return OutcomeCanceled, nil
	case othersFailure(err): // identify blamed the node that failed
		return OutcomeFailed, err
	case timedOut || node.Classify(err) == driver.KindContext:
		err = timeoutError(timeout, node, err)
		l.health.failed(i, err)
		return OutcomeFailed, err
	default:
		if broken(err, false) {
			l.health.failed(i, err)
		}
		return OutcomeFailed, err
	}
}

// deadlinePassed reports whether c has a deadline that has passed.
func deadlinePassed(c context.Context) bool {
	d, ok := c.Deadline()
	return ok && !time.Now().Before(d)
}

// blankResults returns a result per node, each not tried.
func (l *Locker) blankResults() []NodeResult {
	nodes := make([]NodeResult, len(l.nodes))
	for i := range nodes {
		nodes[i] = NodeResult{Index: i, Node: l.names[i]}
	}
	return nodes
}

func timeoutError(after time.Duration, n Node, err error) error {
	if n.Classify(err) == driver.KindContext || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		err = nil
	}
	return &nodeTimeoutError{after: after, err: err}
}

// tally counts a round's results.
func tally(results []NodeResult) (ok, refused, failed int) {
	for i := range results {
		switch results[i].Outcome {
		case OutcomeOK:
			ok++
		case OutcomeRefused:
			refused++
		case OutcomeFailed:
			failed++
		}
	}
	return ok, refused, failed
}

// detached returns a context for clean-up that must run even when ctx has
// ended: ctx's values without its cancellation or deadline. The node
// timeout of releaseStrategy's calls bounds it.
func detached(ctx context.Context) context.Context {
	if ctx.Done() == nil {
		return ctx
	}
	return context.WithoutCancel(ctx)
}

// releaseAll asks every node to release value's hold of k (with lost, the
// clean-up of a round lost by an acquisition that waits: withdraw it),
// but for the nodes in skipped, never sent it. With
// notify, the herald also hands the lock to the oldest waiter in its
// queue, and handed reports that it did. Nodes that answered prev, an
// earlier release of the same value, are not asked again. A release to a
// suspect node runs in the background if no call runs there, and is owed
// to it otherwise, or if not answered: sent after the node's next answer
// (health.rejoin).
func (l *Locker) releaseAll(ctx context.Context, k lockKind, value string, lost, notify bool, prev []NodeResult, skipped uint64) (results []NodeResult, handed bool) {
	st := &struct { // one allocation
		plain, herald request
		answer        atomic.Int64
		o             owing
	}{o: owing{rel: owedRelease{kind: k, value: value}, skipped: skipped, prev: prev}}
	st.plain = releaseRequest(k, value, lost, false)
	herald := -1
	if notify {
		herald = l.heraldNow()
		st.herald = releaseRequest(k, value, lost, true)
	}
	results = l.askNodesOwing(ctx, releaseStrategy, func(ctx context.Context, i int) (bool, error) {
		if i != herald {
			return l.requestVote(ctx, i, &st.plain)
		}
		a, err := l.requestAnswer(ctx, i, &st.herald)
		st.answer.Store(a)
		return a > 0, err
	}, nil, &st.o)
	return results, st.answer.Load() == 2
}

// releaseRequest is k's release of value, or after a lost round its
// withdrawal.
func releaseRequest(k lockKind, value string, lost, herald bool) request {
	if lost {
		return k.withdraw(value, herald)
	}
	return k.release(value, herald)
}

// skippedNodes returns the bits of the nodes a round never sent its call:
// it left out as suspect (none beyond 64 nodes: those are all released).
func (l *Locker) skippedNodes(results []NodeResult) (mask uint64) {
	if len(results) > 64 {
		return 0
	}
	for i := range results {
		if notAsked(results[i].Err) {
			mask |= 1 << i
		}
	}
	return mask
}

// contextError is the caller's context error with its cause, if
// distinct, on one line: "context canceled: terminated".
func contextError(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}

// leaderRound is the round of a waiter woken by an empty release notice:
// it asks the nodes one by one in name order until one answers, and goes
// on under the Locker's strategy only if that one granted, so that woken
// waiters do not split the votes (docs/design.md, leader rounds).
func (l *Locker) leaderRound(ctx context.Context, call nodeCall) []NodeResult {
	results := l.blankResults()
	for _, i := range l.order {
		if ctx.Err() != nil {
			break
		}
		if l.suspect.is(i) {
			continue // the round below asks it in the background
		}
		actx, cancel := context.WithTimeout(ctx, l.o.nodeTimeout)
		granted := l.attempt(ctx, actx, i, call, &results[i])
		cancel()
		switch {
		case results[i].Outcome != OutcomeRefused && !granted:
			continue
		case !granted:
			return results
		}
		// Every node this pass asked keeps its answer: not a call to make
		// again, nor one to skip as suspect now. A node that failed here
		// may hold the grant all the same (its reply was lost, or its
		// identity check timed out after it): skipped, its release would
		// never be sent.
		return l.askNodesOwing(ctx, l.o.strategy, call, func(k int) *NodeResult {
			if results[k].Outcome != OutcomeNotTried {
				return &results[k]
			}
			return nil
		}, nil)
	}
	return l.askNodes(ctx, l.o.strategy, call)
}

// acquireOnce is one round of the Redlock algorithm for the lock k on key,
// with the fencing step when k is fenced, a leaderRound after an empty
// notice or a split. A failed round releases every node (withdraws, when
// the acquisition waits for another round: a writer marks that it waits);
// it reports whether that handed the key on.
func (l *Locker) acquireOnce(ctx context.Context, key string, k lockKind, woken wakeKind, waits bool) (*Lock, *QuorumError, bool) {
	value := lockValue(k)
	ttl := l.o.ttl
	start := l.o.clock.Now()
	call, counters := l.grantCall(k, value, woken == wokenByTicket)

	var results []NodeResult
	if (woken == wokenByNotice || woken == wokenBySplit) && len(l.nodes) > 1 {
		results = l.leaderRound(ctx, call)
	} else {
		results = l.askNodes(ctx, l.o.strategy, call)
	}
	ok, _, _ := tally(results)
	var token int64
	var fenceErr *QuorumError
	if counters != nil && ok >= l.o.quorum {
		token, fenceErr = l.raiseFence(ctx, key, k, results, counters)
	}
	validity := ttl - l.o.clock.Now().Sub(start) - l.o.drift()
	if ok >= l.o.quorum && validity > 0 && fenceErr == nil {
		lock := &Lock{locker: l, key: key, kind: k, value: value, token: token, taken: start, deadline: start.Add(ttl - l.o.drift()), skipped: l.skippedNodes(results)}
		if l.obs != nil {
			lock.nodes = results // kept for the Observer only
		}
		return lock, nil, false
	}

	// Redlock rule 5: release every node, even after ctx ended. Only a round
	// no notice started announces this release (docs/design.md, a round).
	_, handed := l.releaseAll(detached(ctx), k, value, waits, ok > 0 && woken == wokenByNothing, nil, l.skippedNodes(results))
	if fenceErr != nil {
		fenceErr.Context = contextError(ctx)
		return nil, fenceErr, handed
	}

	qe := &QuorumError{Op: OpAcquire, Key: key, Quorum: l.o.quorum, Nodes: results, Validity: validity, Context: contextError(ctx)}
	qe.Reason = l.lostBecause(ctx, results)
	return nil, qe, handed
}

// lostBecause says why a round whose results are these won no lock.
func (l *Locker) lostBecause(ctx context.Context, results []NodeResult) error {
	ok, refused, failed := tally(results)
	_, young := guardWait(results, l.o.quorum)
	switch {
	case ok >= l.o.quorum:
		return ErrValidityExpired
	case young:
		return ErrNodeRestarted
	case failed > len(l.nodes)-l.o.quorum, ok+refused+failed == 0 && ctx.Err() == nil:
		return ErrUnavailable // too many failures, or a starved round that asked no one
	default:
		return ErrNotAcquired
	}
}

// suspects marks the nodes that rounds ask in the background, one call
// at a time (docs/design.md, node health); node health sets the marks.
type suspects []atomic.Bool

// is reports whether node i is suspect.
func (s suspects) is(i int) bool { return s[i].Load() }

// reached reports whether res is an answer from its node, if only an
// error: not a timeout nor a lost connection.
func reached(res *NodeResult) bool {
	if res.Outcome == OutcomeOK || res.Outcome == OutcomeRefused {
		return true
	}
	var te *nodeTimeoutError
	return res.Outcome == OutcomeFailed && !errors.As(res.Err, &te) && !errors.Is(res.Err, ErrNodeSuspect) && !broken(res.Err, false)
}
