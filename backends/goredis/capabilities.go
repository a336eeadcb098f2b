package goredis

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/core/driver"
)

// pipeliner is the part of a go-redis client that EvalBatch pipelines
// with: *redis.Client, *redis.ClusterClient and *redis.Ring have it.
type pipeliner interface{ Pipeline() redis.Pipeliner }

// subscriber is the part of a go-redis client that Watch subscribes with:
// *redis.Client, *redis.ClusterClient and *redis.Ring have it.
type subscriber interface {
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

// EvalBatch implements driver.Batcher: it sends every call (EVAL when its
// Source is set, else EVALSHA) in one go-redis pipeline, one round trip; on
// a *redis.ClusterClient, go-redis sends each call to the master of its
// keys' slot, one pipeline per master. A call's error (NOSCRIPT among
// them) is its own; the others still run. A context that has already
// ended sends nothing. A client without Pipeline (a Client implemented
// by the user) gets the calls one by one, in order.
func (n *Node) EvalBatch(ctx context.Context, calls []driver.Call) {
	if err := ctx.Err(); err != nil {
		driver.FailAll(calls, err)
		return
	}
	p, ok := n.client.(pipeliner)
	if !ok {
		driver.EvalEach(ctx, n, calls)
		return
	}
	pipe := p.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		if c.Source != "" {
			cmds[i] = pipe.Eval(ctx, c.Source, c.Keys, driver.Anys(c.Args)...)
		} else {
			cmds[i] = pipe.EvalSha(ctx, c.SHA, c.Keys, driver.Anys(c.Args)...)
		}
	}
	_, execErr := pipe.Exec(ctx)
	for i, cmd := range cmds {
		v, err := cmd.Result()
		if err == nil && v == nil {
			// Never answered: the pipeline failed before this command's
			// reply was read, and go-redis left it unmarked.
			err = cmp.Or(execErr, errors.New("goredis: pipeline returned no reply"))
		}
		calls[i].Reply, calls[i].Err = v, n.explain(err)
	}
}

// Watch implements driver.Watcher with a go-redis PubSub: SUBSCRIBE channel
// on a connection of its own, and Watch returns once the server has
// confirmed it (or with the error, when ctx ends first or the subscription
// fails). A goroutine then receives the messages and calls notify with each
// one on channel. If the connection is lost, the goroutine subscribes again
// on a new PubSub, pacing its attempts (driver.Resubscribe); notify is then
// called once, since a release may have been missed in between. stop
// closes the PubSub, which ends the goroutine at once even when the server
// does not answer, and waits for it; it may be called more than once.
//
// A client without Subscribe (a Client implemented by the user) makes
// Watch return an error matching errors.ErrUnsupported. On a
// *redis.ClusterClient the subscription goes to one master; Redis Cluster
// forwards every PUBLISH to all of them.
func (n *Node) Watch(ctx context.Context, channel string, notify func(message string)) (stop func(), err error) {
	sub, ok := n.client.(subscriber)
	if !ok {
		return nil, fmt.Errorf("goredis: client %T has no Subscribe method: %w", n.client, errors.ErrUnsupported)
	}
	first := ctx // Watch's, whose deadline bounds the first attempt's connecting
	return driver.Resubscribe(ctx, func(ctx context.Context, subscribed func(), message func(string)) error {
		ps := sub.Subscribe(ctx) // no channel yet: nothing sent
		defer ps.Close()
		defer driver.AfterDone(ctx, func() { _ = ps.Close() })() // ends Receive at once
		sctx := cmp.Or(first, ctx)
		first = nil
		if err := ps.Subscribe(sctx, channel); err != nil {
			return err
		}
		for {
			switch m, err := ps.Receive(ctx); m := m.(type) {
			case nil:
				return err
			case *redis.Subscription:
				if m.Kind == "subscribe" && m.Channel == channel {
					subscribed()
				}
			case *redis.Message:
				if m.Channel == channel {
					message(m.Payload)
				}
			}
		}
	}, notify, func(err error) bool { return errors.Is(err, redis.ErrClosed) })
}
