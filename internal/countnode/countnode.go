// Package countnode wraps a core.Node to count the calls made on it, for
// tests and benchmarks, while keeping the optional capabilities
// (driver.Batcher, driver.Watcher) of the node it wraps: core discovers those
// with type assertions, so a wrapper that hid them would change what it
// measures.
package countnode

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// Counts are the calls made on a wrapped node so far. A batch counts once
// in Batches, whatever its size.
//
// Acquires counts the acquisition attempts among the calls, whatever their
// form: SET NX, or an acquisition script (driver.IsAcquisition).
type Counts struct {
	SetNX, EvalSHA, Eval, Batches, Watches atomic.Int64
	Acquires                               atomic.Int64
}

// RoundTrips is the number of requests the node sent to its server: one
// per call, one per batch.
func (c *Counts) RoundTrips() int64 {
	return c.SetNX.Load() + c.EvalSHA.Load() + c.Eval.Load() + c.Batches.Load() + c.Watches.Load()
}

// Wrap returns a node that counts its calls in the returned Counts and
// forwards them to n. It is a driver.Batcher when n is one, and a
// driver.Watcher when n is one.
func Wrap(n core.Node) (core.Node, *Counts) {
	c := &node{Node: n, counts: new(Counts)}
	b, isBatcher := n.(driver.Batcher)
	w, isWatcher := n.(driver.Watcher)
	switch {
	case isBatcher && isWatcher:
		return &batchWatcher{batcher{c, b}, watcher{c, w}}, c.counts
	case isBatcher:
		return &batcher{c, b}, c.counts
	case isWatcher:
		return &watcher{c, w}, c.counts
	default:
		return c, c.counts
	}
}

// node counts the calls of core.Node.
type node struct {
	core.Node
	counts *Counts
}

func (n *node) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	n.counts.SetNX.Add(1)
	n.counts.Acquires.Add(1)
	return n.Node.SetNX(ctx, key, value, ttl)
}

func (n *node) EvalSHA(ctx context.Context, sha string, keys, args []string) (any, error) {
	n.counts.EvalSHA.Add(1)
	if driver.IsAcquisition(sha, "") {
		n.counts.Acquires.Add(1)
	}
	return n.Node.EvalSHA(ctx, sha, keys, args)
}

func (n *node) Eval(ctx context.Context, script string, keys, args []string) (any, error) {
	n.counts.Eval.Add(1)
	if driver.IsAcquisition("", script) {
		n.counts.Acquires.Add(1)
	}
	return n.Node.Eval(ctx, script, keys, args)
}

// batcher adds driver.Batcher.
type batcher struct {
	*node
	b driver.Batcher
}

func (n *batcher) EvalBatch(ctx context.Context, calls []driver.Call) {
	n.counts.Batches.Add(1)
	n.b.EvalBatch(ctx, calls)
}

// watcher adds driver.Watcher.
type watcher struct {
	*node
	w driver.Watcher
}

func (n *watcher) Watch(ctx context.Context, channel string, notify func(message string)) (func(), error) {
	n.counts.Watches.Add(1)
	return n.w.Watch(ctx, channel, notify)
}

// batchWatcher has both capabilities.
type batchWatcher struct {
	batcher
	watcher
}

// The core.Node methods, which batcher and watcher both promote; the
// struct must name one to have them at all.

func (n *batchWatcher) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	return n.batcher.SetNX(ctx, key, value, ttl)
}

func (n *batchWatcher) EvalSHA(ctx context.Context, sha string, keys, args []string) (any, error) {
	return n.batcher.EvalSHA(ctx, sha, keys, args)
}

func (n *batchWatcher) Eval(ctx context.Context, script string, keys, args []string) (any, error) {
	return n.batcher.Eval(ctx, script, keys, args)
}

// Sharded is the wrapped node's (driver.Sharded).
func (n *batchWatcher) Sharded() bool { return n.batcher.Sharded() }

func (n *batchWatcher) Classify(err error) driver.ErrorKind { return n.batcher.Classify(err) }
func (n *batchWatcher) String() string                      { return n.batcher.String() }
func (n *batchWatcher) Close() error                        { return n.batcher.Close() }

var (
	_ core.Node      = (*node)(nil)
	_ driver.Batcher = (*batcher)(nil)
	_ driver.Watcher = (*watcher)(nil)
	_ driver.Batcher = (*batchWatcher)(nil)
	_ driver.Watcher = (*batchWatcher)(nil)
)

// Sharded forwards driver.Sharded, so that the restart guard sees the node
// it wraps as it is.
func (n *node) Sharded() bool {
	s, ok := n.Node.(driver.Sharded)
	return ok && s.Sharded()
}
