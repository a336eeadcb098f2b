package core

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/quorumlock/quorumlock/core/driver"
)

// This file is leader election: a leader is a mutex on the key whose
// stored value is the lock's random value, a colon and the
// candidate's value, always fenced, so that its fencing token is the term.
// Its grant and release announce themselves on driver.LeaderChannel, and
// Observe reads the leader again on each notice. Why it is safe:
// docs/safety.md; its keys and promises: docs/locks.md, leader election.

// Leader is who leads a key: the value its leader campaigned with and its
// term (the leader's fencing token). The zero Leader means nobody leads.
type Leader struct {
	Value string
	Term  int64
}

// maxLeaderValue is the longest value, in bytes, a candidate may campaign
// with (Campaign's doc says it).
const maxLeaderValue = 256

// leaderSeparator joins a leader's random lock value and its candidate's
// value in the key's stored value: "<random>:<value>" (docs/locks.md).
const leaderSeparator = ":"

// lockLeader names the leader's lock for observers (Event.Lock).
const lockLeader = "leader"

// election is a leader's lock: a mutex, always fenced, whose grants carry
// the candidate's value and, with its release, announce the change on the
// key's leader channel.
type election struct {
	*mutex
	value   string // the candidate's value; "" for a read (Leader, Observe)
	channel string // driver.LeaderChannel of the stored key
}

// newElection returns the leader's lock of key for a candidate of value,
// or refuses a key the protocol cannot use (one with no fencing counter).
func (l *Locker) newElection(key, value string) (*election, error) {
	m, err := l.newMutex(key)
	if err != nil {
		return nil, err
	}
	if m.fenceKey == "" {
		fence, ok := driver.FenceKey(m.rkey)
		if !ok {
			return nil, untagged(key, "no term counter can share")
		}
		m.fenceKey = fence
		m.names[3], m.names[6] = fence, fence
	}
	return &election{mutex: m, value: value, channel: driver.LeaderChannel(m.rkey)}, nil
}

func (e *election) grant(value string, handed bool) (plain, guarded request) {
	plain, guarded = e.mutex.grant(value, handed)
	plain.argv[plain.argc], guarded.argv[guarded.argc] = e.channel, e.channel
	plain.argc++
	guarded.argc++
	return plain, guarded
}

func (e *election) release(value string, herald bool) request {
	r := e.mutex.release(value, herald)
	if r.argc == 1 {
		r.argv[1], r.argc = "", 2 // no hand-off here
	}
	r.argv[r.argc] = e.channel
	r.argc++
	return r
}

// withdraw is release: no read lock waits behind a leader's key.
func (e *election) withdraw(value string, herald bool) request { return e.release(value, herald) }

// lockValue returns a new value for a lock of kind k: the random value,
// and for a leader's lock its candidate's value after leaderSeparator.
func lockValue(k lockKind) string {
	if e, ok := k.(*election); ok {
		return newValue() + leaderSeparator + e.value
	}
	return newValue()
}

// checkLeaderValue refuses a candidate's value that is empty, longer than
// maxLeaderValue, not UTF-8 or with control characters (status and
// Observe print it on one line).
func checkLeaderValue(value string) error {
	switch {
	case value == "":
		return invalid("leader value is empty")
	case len(value) > maxLeaderValue:
		return invalid("leader value is %d bytes, more than %d", len(value), maxLeaderValue)
	case !utf8.ValidString(value):
		return invalid("leader value %q is not valid UTF-8", value)
	case strings.IndexFunc(value, unicode.IsControl) >= 0:
		return invalid("leader value %q contains a control character", value)
	}
	return nil
}

// Campaign blocks until this caller leads key, then returns the leader's
// lock: kept alive (KeepAlive is started), with its term as Token (whether
// or not the Locker has WithFencing), and value as what Leader and Observe
// report. Release resigns; Done, Err and Context tell a lost leadership,
// with the at-risk margin of lead time when extensions fail, as for any
// kept lock. Candidates waiting for a resigning leader are handed the key
// as Acquire's waiters are.
//
// Its errors are Acquire's (it makes rounds until ctx ends or the Locker
// closes), and KeepAlive's, after which it resigns at once; an empty
// value, one longer than 256 bytes, not valid UTF-8 or with control
// characters matches ErrInvalidArgument.
func (l *Locker) Campaign(ctx context.Context, key, value string) (*Lock, error) {
	if l.zero() {
		return nil, errZeroLocker
	}
	if err := checkLeaderValue(value); err != nil {
		return nil, err
	}
	if l.o.keepAliveErr != nil { // before a term is taken and announced
		return nil, l.o.keepAliveErr
	}
	lock, err := l.acquire(ctx, target{key: key, candidate: value}, math.MaxInt)
	if err != nil {
		return nil, err
	}
	if err := lock.KeepAlive(); err != nil {
		return nil, errors.Join(err, lock.Release(detached(ctx)))
	}
	return lock, nil
}

// Leader returns who leads key, from one read of every node: the value
// that a quorum of the answering nodes holds, and as its term the
// greatest fencing counter among them (the leader's Token once its
// acquisition has finished). With no such value it returns the zero
// Leader: nobody leads, or a campaign is half-way. Fewer than a quorum of
// answers give a *QuorumError matching ErrUnavailable; an empty key or a
// nil context ErrInvalidArgument, as does a key that a lock of another
// kind holds, and a closed Locker ErrClosed.
func (l *Locker) Leader(ctx context.Context, key string) (Leader, error) {
	r, err := l.enterRead(ctx, key)
	if err != nil {
		return Leader{}, err
	}
	defer l.leave(nil)
	s, err := r.read(ctx)
	return s.leader, err
}

// leaderRead is a read of one key's leader.
type leaderRead struct {
	l   *Locker
	key string
	e   *election
	req request
}

// enterRead checks the arguments of Leader and Observe and enters the
// Locker (the caller leaves it).
func (l *Locker) enterRead(ctx context.Context, key string) (*leaderRead, error) {
	if err := l.readArgs(ctx, key); err != nil {
		return nil, err
	}
	e, err := l.newElection(key, "")
	if err != nil {
		return nil, err
	}
	if !l.enter(nil) {
		return nil, l.closedError(OpInspect, key)
	}
	return &leaderRead{l: l, key: key, e: e, req: newRequest(driver.ScriptLeader, []string{e.rkey, e.fenceKey})}, nil
}

// leaderState is what one read found: the leader, and the stored value
// that makes it (to tell terms apart).
type leaderState struct {
	leader Leader
	stored string
}

// read reads the leader once from every node.
func (r *leaderRead) read(ctx context.Context) (leaderState, error) {
	l := r.l
	type answer struct {
		value   string
		counter int64
	}
	answers := make([]answer, len(l.nodes)) // read only for the nodes the round waited for
	results := l.askNodes(ctx, releaseStrategy, func(ctx context.Context, i int) (bool, error) {
		reply, err := l.send(ctx, i, &r.req)
		if err != nil {
			return false, err
		}
		a, _ := reply.([]any)
		switch {
		case len(a) == 0:
			answers[i] = answer{}
			return true, nil
		case len(a) == 2:
			v, ok1 := a[0].(string)
			c, ok2 := a[1].(int64)
			if ok1 && ok2 {
				answers[i] = answer{v, c}
				return true, nil
			}
		}
		return false, fmt.Errorf("quorumlock: leader: unexpected reply %#v", reply)
	})
	if ok, _, _ := tally(results); ok < l.o.quorum {
		return leaderState{}, &QuorumError{Op: OpInspect, Key: r.key, Quorum: l.o.quorum, Reason: ErrUnavailable,
			Context: contextError(ctx), Nodes: results}
	}
	for i := range results {
		if results[i].Outcome != OutcomeOK || answers[i].value == "" {
			continue
		}
		n, term := 0, int64(0)
		for j := range results {
			if results[j].Outcome == OutcomeOK && answers[j].value == answers[i].value {
				n++
				term = max(term, answers[j].counter)
			}
		}
		if n >= l.o.quorum {
			value, ok := leaderValue(answers[i].value)
			if !ok {
				return leaderState{}, invalid("key %q is held by a lock that is not a leader's (a plain, shared or multi-key lock)", r.key)
			}
			return leaderState{leader: Leader{Value: value, Term: term}, stored: answers[i].value}, nil
		}
	}
	return leaderState{}, nil
}

// leaderValue returns the candidate's value in a leader's stored value.
func leaderValue(stored string) (string, bool) {
	random, value, ok := strings.Cut(stored, leaderSeparator)
	if !ok || len(random) != valueLen || checkLeaderValue(value) != nil {
		return "", false
	}
	return value, true
}

// observePoll is how often Observe reads the leader without a notice, as
// a fraction of the TTL: a leader whose key expires (a killed process)
// is seen gone within TTL/4 of its expiry.
const observePoll = 4

// Observe returns a channel of key's leaders: the current one first
// (Leader's answer, the zero Leader when nobody leads), then each change,
// the zero Leader when leadership ends. It reads the leader again on each
// notice of a grant or release from a node (one subscription per node that
// can watch, driver.Watcher: the grant that completes a quorum announces
// it) and every TTL/4 in any case: a new leader or a resignation is seen
// at once, an expired leader's end within TTL/4 of its expiry.
// A read that fails sends nothing. The channel is closed when ctx ends or
// the Locker closes; a reader that lags delays later reads.
//
// It fails as Leader does when the first read fails.
func (l *Locker) Observe(ctx context.Context, key string) (<-chan Leader, error) {
	r, err := l.enterRead(ctx, key)
	if err != nil {
		return nil, err
	}
	octx, cancel := context.WithCancelCause(ctx)
	h := &hold{cancel: cancel}
	l.leave(nil)
	if !l.enter(h) { // Close cancels the observer and waits for it
		cancel(nil)
		return nil, l.closedError(OpInspect, key)
	}
	o := &observer{r: r, ctx: octx, h: h, wake: make(chan struct{}, 1), out: make(chan Leader)}
	o.watch()
	first, err := r.read(octx)
	if err != nil {
		o.end()
		return nil, err
	}
	go o.run(first)
	return o.out, nil
}

// observer is one Observe's state.
type observer struct {
	r     *leaderRead
	ctx   context.Context
	h     *hold
	wake  chan struct{} // a notice came
	stops []func()      // end the subscriptions
	out   chan Leader
}

// watch subscribes to the key's leader channel on every node that can
// watch, at once, each bounded as the hub's subscriptions are: a grant
// publishes only on the nodes its round asked, and a round that stops at
// quorum may not ask a given one. A node that cannot subscribe is left
// to the poll.
func (o *observer) watch() {
	l := o.r.l
	ctx, cancel := context.WithTimeout(o.ctx, max(l.o.nodeTimeout, minSubscribeTimeout))
	defer cancel()
	notify := func(string) {
		select {
		case o.wake <- struct{}{}:
		default:
		}
	}
	stops := make([]func(), len(l.nodes))
	var wg sync.WaitGroup
	for i, n := range l.nodes {
		if wn, ok := n.(driver.Watcher); ok {
			wg.Go(func() {
				if stop, err := wn.Watch(ctx, o.r.e.channel, notify); err == nil {
					stops[i] = stop
				}
			})
		}
	}
	wg.Wait()
	for _, stop := range stops {
		if stop != nil {
			o.stops = append(o.stops, stop)
		}
	}
}

// end stops the subscriptions and leaves the Locker.
func (o *observer) end() {
	for _, stop := range o.stops {
		stop()
	}
	o.h.cancel(nil)
	o.r.l.leave(o.h)
}

// run sends first, then each change, until the context ends.
func (o *observer) run(s leaderState) {
	defer close(o.out)
	defer o.end()
	l := o.r.l
	poll := max(l.o.ttl/observePoll, MinRetryDelay)
	timer := l.o.clock.NewTimer(poll)
	defer func() { timer.Stop() }()
	last, sent := "", false
	var term int64
	for {
		// A new leader's term may be read before its raise has reached the
		// nodes read: the same leader read again with a greater term is
		// sent again (never with a lower one), and a new leader is read
		// again soon, so that its term settles.
		next := poll
		if !sent || s.stored != last || s.leader.Term > term {
			select {
			case o.out <- s.leader:
			case <-o.ctx.Done():
				return
			}
			if s.stored != last && s.leader.Value != "" {
				next = min(poll, 2*l.o.nodeTimeout)
			}
			last, term, sent = s.stored, s.leader.Term, true
		}
		timer.Stop()
		timer = l.o.clock.NewTimer(next)
		select {
		case <-o.ctx.Done():
			return
		case <-o.wake:
		case <-timer.C():
		}
		if read, err := o.r.read(o.ctx); err == nil {
			s = read
		}
	}
}
