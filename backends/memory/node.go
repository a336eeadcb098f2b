package memory

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// downError is ErrDown.
type downError struct{}

func (downError) Error() string { return "memory: node is down" }
func (downError) Unwrap() error { return syscall.ECONNREFUSED }

// Errors a Node returns. Classify maps ErrNoScript to driver.KindNoScript,
// context errors to driver.KindContext, and every other error to
// driver.KindNodeFailure.
var (
	// ErrDown is returned while the node is stopped. It matches
	// syscall.ECONNREFUSED, as a stopped server's refused connection does.
	ErrDown error = downError{}
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("memory: node is closed")
	// ErrReplyLost is returned, while DropReplies is on, after the command
	// was carried out: the caller cannot know that it was.
	ErrReplyLost = errors.New("memory: reply lost")
	// ErrNoScript is Redis's NOSCRIPT: EVALSHA of a script this node has not
	// seen since it started or since FlushScripts.
	ErrNoScript = errors.New("NOSCRIPT no matching script, use EVAL")
	// ErrWatchRefused is returned by Watch while RefuseWatches is on.
	ErrWatchRefused = errors.New("memory: subscription refused")
)

// Node is an in-process lock node: a key-value store with millisecond
// expiry that runs the lock protocol's commands itself. It implements
// core.Node and is safe for concurrent use.
type Node struct {
	name    string
	clock   driver.Clock
	started time.Time // when the node last started: its data began then

	mu          sync.Mutex
	data        map[string]entry
	scripts     map[string]struct{} // SHAs loaded with Eval, as Redis's script cache
	closed      bool
	down        bool
	paused      chan struct{} // non-nil while paused; closed by Resume
	latency     time.Duration
	dropReplies bool
	refuseWatch bool
	calls       Calls
	writes      int // since the last sweep of expired keys
	subs        map[string]map[*subscription]struct{}
}

var (
	_ core.Node      = (*Node)(nil)
	_ driver.Batcher = (*Node)(nil)
	_ driver.Watcher = (*Node)(nil)
)

type subscription struct{ notify func(message string) }

type entry struct {
	value   string
	list    []string  // a list's items (the wait queue), oldest first
	zset    readers   // a sorted set's members (a key's readers)
	expires time.Time // zero: no expiry
}

func (e entry) live(now time.Time) bool { return e.expires.IsZero() || now.Before(e.expires) }

// Calls counts the commands a node has received, faults included. A batch
// counts once in Batches and each of its calls in EvalSHA or Eval.
// Acquires counts the acquisition attempts among them, whatever their form:
// SET NX, or an acquisition script (driver.IsAcquisition); Identifies
// counts core's identity checks among the scripts (driver.ScriptIdentify).
type Calls struct {
	SetNX, EvalSHA, Eval, Batches, Watches int
	Acquires, Identifies                   int
}

// Option configures a Node. Options apply in order, a later one
// overriding an earlier one of the same kind; a nil Option is skipped. Its
// String shows the option as written.
type Option interface {
	apply(*Node)
	String() string
}

type option struct {
	fn   func(*Node)
	name string
}

func (o option) apply(n *Node)  { o.fn(n) }
func (o option) String() string { return o.name }

// WithName names the node; "" keeps the default. core.New refuses two
// nodes of one name in a Locker.
// Default: "memory-N", with N counting the nodes made in this process.
func WithName(name string) Option {
	return option{func(n *Node) {
		if name != "" {
			n.name = name
		}
	}, "WithName(" + strconv.Quote(name) + ")"}
}

// WithClock sets the clock the node's key expiry follows (a ManualClock
// for tests that move time by hand). Latency and pauses always run on
// real time. A nil c changes nothing: the clock stays the default (or the
// one an earlier option set). Every value is valid.
// Default: driver.SystemClock().
func WithClock(c driver.Clock) Option {
	if driver.IsNil(c) {
		return option{func(*Node) {}, "WithClock(nil)"}
	}
	return option{func(n *Node) { n.clock = c }, "WithClock(...)"}
}

var counter atomic.Int64

// New returns a running, empty node.
func New(opts ...Option) *Node {
	n := &Node{
		name:    "memory-" + strconv.FormatInt(counter.Add(1), 10),
		clock:   driver.SystemClock(),
		data:    make(map[string]entry),
		scripts: make(map[string]struct{}),
		subs:    make(map[string]map[*subscription]struct{}),
	}
	// A new node is adopted: it cannot have held a lock before it existed.
	// Start, the restart without persistence, forgets this as Redis does.
	n.data[driver.BirthKey] = entry{value: "0"}
	for _, o := range opts {
		if o != nil {
			o.apply(n)
		}
	}
	n.started = n.clock.Now()
	return n
}

// NewNodes returns n nodes made with the same options and distinct names.
func NewNodes(n int, opts ...Option) []*Node {
	nodes := make([]*Node, n)
	for i := range nodes {
		nodes[i] = New(opts...)
	}
	return nodes
}

// AsNodes converts nodes for core.New.
func AsNodes(nodes []*Node) []core.Node {
	out := make([]core.Node, len(nodes))
	for i, n := range nodes {
		out[i] = n
	}
	return out
}

// String returns the node's name.
func (n *Node) String() string { return n.name }

// Close makes every later call fail with ErrClosed.
func (n *Node) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	if n.paused != nil {
		close(n.paused)
		n.paused = nil
	}
	return nil
}

// Classify implements core.Node.
func (n *Node) Classify(err error) driver.ErrorKind {
	switch {
	case errors.Is(err, ErrNoScript):
		return driver.KindNoScript
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return driver.KindContext
	default:
		return driver.KindNodeFailure
	}
}

// SetNX implements core.Node: SET key value NX PX ttl.
func (n *Node) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if err := n.enter(ctx, func(c *Calls) { c.SetNX++; c.Acquires++ }); err != nil {
		return false, err
	}
	if ttl < time.Millisecond {
		return false, errors.New("ERR invalid expire time in 'set' command")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.clock.Now()
	if e, ok := n.data[key]; ok && e.live(now) {
		return false, n.reply()
	}
	n.data[key] = entry{value: value, expires: now.Add(ttl.Truncate(time.Millisecond))}
	if n.writes++; n.writes >= sweepEvery {
		n.sweep(now)
	}
	return true, n.reply()
}

// EvalSHA implements core.Node for the scripts of the lock protocol.
func (n *Node) EvalSHA(ctx context.Context, sha string, keys, args []string) (any, error) {
	if err := n.enter(ctx, func(c *Calls) {
		c.EvalSHA++
		if driver.IsAcquisition(sha, "") {
			c.Acquires++
		}
		if sha == driver.ScriptIdentify.SHA() {
			c.Identifies++
		}
	}); err != nil {
		return nil, err
	}
	n.mu.Lock()
	reply, notify, err := n.evalLocked(sha, "", keys, args)
	n.mu.Unlock()
	deliver(notify)
	return reply, err
}

// Eval implements core.Node for the scripts of the lock protocol, and
// caches the script for later EvalSHA calls, as Redis does.
func (n *Node) Eval(ctx context.Context, script string, keys, args []string) (any, error) {
	if err := n.enter(ctx, func(c *Calls) {
		c.Eval++
		if driver.IsAcquisition("", script) {
			c.Acquires++
		}
		if script == driver.ScriptIdentify.Source() {
			c.Identifies++
		}
	}); err != nil {
		return nil, err
	}
	n.mu.Lock()
	reply, notify, err := n.evalLocked("", script, keys, args)
	n.mu.Unlock()
	deliver(notify)
	return reply, err
}

// evalLocked runs a script given by source (EVAL, which caches it) or by
// SHA (EVALSHA, NOSCRIPT unless cached); n.mu is held. It returns the
// notify functions for the caller to call once n.mu is unlocked.
func (n *Node) evalLocked(sha, source string, keys, args []string) (any, []func(), error) {
	if source != "" {
		sum := sha1.Sum([]byte(source))
		sha = hex.EncodeToString(sum[:])
		n.scripts[sha] = struct{}{}
	} else if _, ok := n.scripts[sha]; !ok {
		return nil, nil, ErrNoScript
	}
	return n.run(sha, keys, args)
}

// EvalBatch implements driver.Batcher: the calls pay the node's faults
// (latency, pause, stop) once, as one round trip does, and then run in
// order.
func (n *Node) EvalBatch(ctx context.Context, calls []driver.Call) {
	if err := n.enter(ctx, func(c *Calls) { c.Batches++ }); err != nil {
		for i := range calls {
			calls[i].Reply, calls[i].Err = nil, err
		}
		return
	}
	var notify []func()
	n.mu.Lock()
	for i := range calls {
		c := &calls[i]
		if c.Source != "" {
			n.calls.Eval++
		} else {
			n.calls.EvalSHA++
		}
		var more []func()
		c.Reply, more, c.Err = n.evalLocked(c.SHA, c.Source, c.Keys, c.Args)
		notify = append(notify, more...)
	}
	n.mu.Unlock()
	deliver(notify)
}

// Watch implements driver.Watcher with in-process subscriptions: a release
// of a key through this node notifies the watchers of its channel.
func (n *Node) Watch(ctx context.Context, channel string, notify func(message string)) (stop func(), err error) {
	if notify == nil {
		return nil, fmt.Errorf("%w: memory: Watch with a nil notify", core.ErrInvalidArgument)
	}
	if err := n.enter(ctx, func(c *Calls) { c.Watches++ }); err != nil {
		return nil, err
	}
	s := &subscription{notify: notify}
	n.mu.Lock()
	if n.refuseWatch {
		n.mu.Unlock()
		return nil, ErrWatchRefused
	}
	set := n.subs[channel]
	if set == nil {
		set = make(map[*subscription]struct{})
		n.subs[channel] = set
	}
	set[s] = struct{}{}
	n.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			delete(n.subs[channel], s)
			if len(n.subs[channel]) == 0 {
				delete(n.subs, channel)
			}
		})
	}, nil
}

// publish returns the calls that deliver message to channel's watchers;
// n.mu is held.
func (n *Node) publish(channel, message string) []func() {
	set := n.subs[channel]
	if len(set) == 0 {
		return nil
	}
	out := make([]func(), 0, len(set))
	for s := range set {
		out = append(out, func() { s.notify(message) })
	}
	return out
}

func deliver(notify []func()) {
	for _, f := range notify {
		f()
	}
}

// sweepEvery is how many writes pass between two sweeps of expired keys,
// which keeps a long-lived node's memory bounded by its live keys.
const sweepEvery = 4096

func (n *Node) sweep(now time.Time) {
	n.writes = 0
	for k, e := range n.data {
		if !e.live(now) {
			delete(n.data, k)
		}
	}
}

// reply is the error of a command that was carried out: nil, or
// ErrReplyLost while DropReplies is on. n.mu is held.
func (n *Node) reply() error {
	if n.dropReplies {
		return ErrReplyLost
	}
	return nil
}

// enter counts a call and plays the node's faults before it: a closed or
// stopped node fails, a paused one waits for Resume, latency delays it.
func (n *Node) enter(ctx context.Context, count func(*Calls)) error {
	n.mu.Lock()
	count(&n.calls)
	closed, down, paused, latency := n.closed, n.down, n.paused, n.latency
	n.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case down:
		return ErrDown
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if paused != nil {
		select {
		case <-paused:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if latency > 0 {
		t := time.NewTimer(latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	n.mu.Lock()
	closed, down = n.closed, n.down
	n.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case down:
		return ErrDown
	}
	return nil
}

// Stop takes the node down: calls fail with ErrDown until Start.
func (n *Node) Stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down = true
}

// Start brings a stopped node back the way a Redis server without
// persistence restarts: with no keys and no cached scripts.
func (n *Node) Start() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down = false
	n.started = n.clock.Now()
	clear(n.data)
	clear(n.scripts)
}

// StartKeepingData brings a stopped node back the way a Redis server with
// persistence restarts: with the keys it held (those not expired since)
// but no cached scripts.
func (n *Node) StartKeepingData() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down = false
	clear(n.scripts)
}

// Pause makes calls wait, as a server stopped with SIGSTOP does, until
// Resume or until their context ends.
func (n *Node) Pause() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.paused == nil {
		n.paused = make(chan struct{})
	}
}

// Resume lets paused calls proceed.
func (n *Node) Resume() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.paused != nil {
		close(n.paused)
		n.paused = nil
	}
}

// SetLatency delays every later call by d (real time); 0 removes the delay.
func (n *Node) SetLatency(d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.latency = d
}

// DropReplies makes every later command take effect but return
// ErrReplyLost, as when a connection breaks after the server acted.
func (n *Node) DropReplies(on bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.dropReplies = on
}

// RefuseWatches makes every later Watch fail with ErrWatchRefused, as a
// server at its client limit refuses the connection a subscription needs
// while the client's open connections go on; off lets Watch succeed again.
// Subscriptions already made stay.
func (n *Node) RefuseWatches(on bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.refuseWatch = on
}

// DropConnections plays a dropped pub/sub connection that the client made
// again at once: every subscription made by Watch stays, and its notify is
// called once with an empty message, as the Redis backends do after they
// subscribe again (a release may have been published while they were
// away). It does so whatever the node's state, and calls notify on the
// caller's goroutine. Notices published before or after it arrive as
// usual.
func (n *Node) DropConnections() {
	n.mu.Lock()
	var notify []func()
	for channel := range n.subs {
		notify = append(notify, n.publish(channel, "")...)
	}
	n.mu.Unlock()
	deliver(notify)
}

// FlushScripts empties the script cache, as SCRIPT FLUSH does: the next
// EvalSHA of each script fails with ErrNoScript.
func (n *Node) FlushScripts() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.scripts)
}

// Set stores value at key directly, with the given expiry (0: none); tests
// use it to plant a rival lock holder or to seed data.
func (n *Node) Set(key, value string, ttl time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	e := entry{value: value}
	if ttl > 0 {
		e.expires = n.clock.Now().Add(ttl)
	}
	n.data[key] = e
}

// Del deletes key directly, as a rival client or an operator would.
func (n *Node) Del(key string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.data, key)
}

// Get reads key directly: its value and remaining TTL (0 when it has no
// expiry), and whether it exists.
func (n *Node) Get(key string) (value string, ttl time.Duration, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.clock.Now()
	e, ok := n.data[key]
	if !ok || !e.live(now) {
		return "", 0, false
	}
	if !e.expires.IsZero() {
		ttl = e.expires.Sub(now)
	}
	return e.value, ttl, true
}

// Keys returns the live keys, sorted, except the node's own birth key and
// identity (driver.BirthKey and driver.IdentityKey, which Get shows): the
// keys that locks left.
func (n *Node) Keys() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.clock.Now()
	keys := make([]string, 0, len(n.data))
	for k, e := range n.data {
		if e.live(now) && k != driver.BirthKey && k != driver.IdentityKey {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// Calls returns the commands received so far.
func (n *Node) Calls() Calls {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.calls
}
