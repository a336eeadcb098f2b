package redigo

import (
	"context"
	"errors"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/quorumlock/quorumlock/core/driver"
)

// EvalBatch implements driver.Batcher on one connection borrowed from the
// pool: it writes every call (EVAL when its Source is set, else EVALSHA),
// flushes them in one write and reads the replies in order, each with
// redis.ReceiveContext, so ctx bounds the wait. A reply that is a Redis
// error (NOSCRIPT among them) is that call's error; a connection error or
// the end of ctx is the error of every call whose reply had not arrived,
// and the connection is then closed, never reused. A context that has
// already ended sends nothing.
//
// The write itself has no deadline of its own (redigo's Flush takes no
// context): it only waits when the batch is larger than the socket
// buffers of a server that does not read.
func (n *Node) EvalBatch(ctx context.Context, calls []driver.Call) {
	if len(calls) == 0 {
		return
	}
	if err := ctx.Err(); err != nil {
		driver.FailAll(calls, err)
		return
	}
	conn, err := n.pool.GetContext(ctx)
	if err != nil {
		driver.FailAll(calls, err)
		return
	}
	defer conn.Close()
	for _, c := range calls {
		if c.Source != "" {
			err = conn.Send("EVAL", scriptArgs(c.Source, c.Keys, c.Args)...)
		} else {
			err = conn.Send("EVALSHA", scriptArgs(c.SHA, c.Keys, c.Args)...)
		}
		if err != nil {
			driver.FailAll(calls, err)
			return
		}
	}
	if err := conn.Flush(); err != nil {
		driver.FailAll(calls, err)
		return
	}
	for i := range calls {
		reply, err := convert(redis.ReceiveContext(conn, ctx))
		var re redis.Error
		if err != nil && !errors.As(err, &re) {
			// The connection broke or ctx ended: redigo has closed the
			// connection, and no later reply will come.
			driver.FailAll(calls[i:], err)
			return
		}
		calls[i].Reply, calls[i].Err = reply, n.explain(err)
	}
}

// Watch implements driver.Watcher with a redis.PubSubConn on a connection
// borrowed from the pool for the whole subscription: SUBSCRIBE channel,
// and Watch returns once the server has confirmed it (or with the error,
// when ctx ends first or the subscription fails). A goroutine then reads
// the messages with redis.ReceiveContext and calls notify for each one on
// channel. If the connection is lost, it borrows another one and
// subscribes again, pacing its attempts (driver.Resubscribe), and calls
// notify once subscribed, since a release may have been missed in between.
//
// stop cancels the goroutine's context, which makes redigo close the
// connection under a pending read, so stop returns at once even when the
// server does not answer; it then waits for the goroutine, and may be
// called more than once. The connection is closed rather than handed back
// for reuse: the pool would unsubscribe it and wait, without a deadline,
// for the server's answer.
func (n *Node) Watch(ctx context.Context, channel string, notify func(message string)) (stop func(), err error) {
	return driver.Resubscribe(ctx, func(ctx context.Context, subscribed func(), message func(string)) error {
		conn, err := n.pool.GetContext(ctx)
		if err != nil {
			return err
		}
		defer discard(conn)
		psc := redis.PubSubConn{Conn: conn}
		if err := psc.Subscribe(channel); err != nil {
			return err
		}
		for {
			switch v := psc.ReceiveContext(ctx).(type) {
			case redis.Subscription:
				if v.Kind == "subscribe" && v.Channel == channel {
					subscribed()
				}
			case redis.Message:
				if v.Channel == channel {
					message(string(v.Data))
				}
			case error:
				return v
			}
		}
	}, notify, func(error) bool { return false })
}

// discard closes a subscribed connection so that the pool drops it. A
// connection that is still healthy is first broken: ReceiveContext with a
// context that has already expired closes it without reading. Handed back
// intact, it would make the pool send UNSUBSCRIBE and wait for the
// server's answer with no deadline.
func discard(conn redis.Conn) {
	if conn.Err() == nil {
		ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
		_, _ = redis.ReceiveContext(conn, ctx)
		cancel()
	}
	_ = conn.Close()
}
