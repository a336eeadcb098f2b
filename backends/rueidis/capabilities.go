package rueidis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/quorumlock/quorumlock/core/driver"
)

var (
	_ driver.Batcher = (*Node)(nil)
	_ driver.Watcher = (*Node)(nil)
)

// multiDoer is the part of a rueidis client that EvalBatch pipelines
// with; rueidis.Client has it.
type multiDoer interface {
	DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult
}

// receiver is the part of a rueidis client that Watch subscribes with;
// rueidis.Client has it.
type receiver interface {
	Receive(ctx context.Context, subscribe rueidis.Completed, fn func(msg rueidis.PubSubMessage)) error
}

// EvalBatch implements driver.Batcher with one DoMulti: every call (EVAL
// when its Source is set, else EVALSHA) is written to the client's
// pipeline at once, one round trip; on a cluster, rueidis sends each call
// to the master of its keys' slot. A call's error (NOSCRIPT among them)
// is its own; the others still run. On a cluster, a call whose keys are
// in different slots gets an error wrapping core.ErrInvalidArgument and is
// not sent. A context that has already ended, or a node closed with
// WithCloseClient(true), sends nothing. A client without DoMulti gets the calls one
// by one, in order, with Do.
func (n *Node) EvalBatch(ctx context.Context, calls []driver.Call) {
	if len(calls) == 0 {
		return
	}
	if err := n.check(ctx, nil); err != nil {
		driver.FailAll(calls, err)
		return
	}
	md, ok := n.client.(multiDoer)
	if !ok {
		driver.EvalEach(ctx, n, calls)
		return
	}
	cmds := make([]rueidis.Completed, 0, len(calls))
	sent := make([]int, 0, len(calls)) // index in calls of each of cmds
	for i, c := range calls {
		if err := n.checkSlot(c.Keys); err != nil {
			calls[i].Reply, calls[i].Err = nil, err
			continue
		}
		cmds = append(cmds, n.build(c))
		sent = append(sent, i)
	}
	if len(cmds) == 0 {
		return
	}
	for j, res := range md.DoMulti(ctx, cmds...) {
		c := &calls[sent[j]]
		v, err := reply(res)
		c.Reply, c.Err = v, n.explain(err)
	}
}

func (n *Node) build(c driver.Call) rueidis.Completed {
	b := n.client.B()
	if c.Source != "" {
		return b.Eval().Script(c.Source).Numkeys(int64(len(c.Keys))).Key(c.Keys...).Arg(c.Args...).Build()
	}
	return b.Evalsha().Sha1(c.SHA).Numkeys(int64(len(c.Keys))).Key(c.Keys...).Arg(c.Args...).Build()
}

// unsubscribeTimeout bounds the UNSUBSCRIBE that a Watch's stop sends, so
// that stop stays short on a server that does not answer (the
// subscription then lasts until the connection closes, harmlessly).
const unsubscribeTimeout = 250 * time.Millisecond

// Watch implements driver.Watcher with rueidis's Receive: SUBSCRIBE channel,
// on the connection the client pipelines its commands on, and Watch
// returns once the server has confirmed it (seen through
// rueidis.WithOnSubscriptionHook), or with Receive's error if it failed
// first, or ctx's error. Receive then calls notify with each message on
// channel from a goroutine of Watch's. If Receive ends while the
// subscription should last (a lost connection), the goroutine subscribes
// again, pacing its attempts, and calls notify once subscribed again,
// since a release may have been missed in between.
//
// stop cancels Receive's context, which rueidis honours at once even when
// the server does not answer, and waits for the goroutine; it may be
// called more than once. When it ends the node's last watch of the
// channel, stop also sends UNSUBSCRIBE on that connection (waiting for
// the server at most 250 ms): rueidis leaves the server's subscription in
// place when Receive returns, and the connection would otherwise keep
// receiving every later release of the key.
//
// A client without Receive makes Watch return an error matching
// errors.ErrUnsupported, and a node closed with WithCloseClient(true)
// refuses with rueidis.ErrClosing.
func (n *Node) Watch(ctx context.Context, channel string, notify func(message string)) (stop func(), err error) {
	if err := n.check(ctx, nil); err != nil {
		return nil, err
	}
	recv, ok := n.client.(receiver)
	if !ok {
		return nil, fmt.Errorf("rueidis: client %T has no Receive method: %w", n.client, errors.ErrUnsupported)
	}
	n.addWatch(channel)
	var once sync.Once
	var last bool
	unwatch := func() bool { // takes the watch off the node's count, once
		once.Do(func() { last = n.removeWatch(channel) })
		return last
	}
	receive := func(ctx context.Context, subscribed func(), message func(string)) error {
		// The hook runs on rueidis's reading goroutine, also when another
		// Receive on the connection subscribes to the same channel;
		// Resubscribe counts one confirmation per attempt.
		rctx := rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
			if s.Kind == "subscribe" && s.Channel == channel {
				subscribed()
			}
		})
		rctx = rueidis.WithOnReceiveReturnHook(rctx, func(err error, cc rueidis.CommandClient) error {
			if ctx.Err() != nil && unwatch() {
				uctx, cancel := context.WithTimeout(context.Background(), unsubscribeTimeout)
				_ = cc.Do(uctx, cc.B().Unsubscribe().Channel(channel).Build()).Error()
				cancel()
			}
			return err
		})
		return recv.Receive(rctx, n.client.B().Subscribe().Channel(channel).Build(), func(m rueidis.PubSubMessage) {
			if m.Channel == channel {
				message(m.Message)
			}
		})
	}
	gone := func(err error) bool { return n.closed.Load() || errors.Is(err, rueidis.ErrClosing) }
	unsubscribe, err := driver.Resubscribe(ctx, receive, notify, gone)
	if err != nil {
		unwatch()
		return nil, err
	}
	return func() { unsubscribe(); unwatch() }, nil
}

// addWatch counts a watch of channel.
func (n *Node) addWatch(channel string) {
	n.watchMu.Lock()
	defer n.watchMu.Unlock()
	if n.watching == nil {
		n.watching = make(map[string]int)
	}
	n.watching[channel]++
}

// removeWatch uncounts a watch of channel and reports whether it was the
// last one.
func (n *Node) removeWatch(channel string) bool {
	n.watchMu.Lock()
	defer n.watchMu.Unlock()
	n.watching[channel]--
	if n.watching[channel] > 0 {
		return false
	}
	delete(n.watching, channel)
	return true
}
