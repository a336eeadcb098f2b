package goredis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/core/driver"
)

var (
	_ driver.Batcher = (*Node)(nil)
	_ driver.Watcher = (*Node)(nil)
)

// pipeliner is the part of a go-redis client that EvalBatch pipelines
// with: *redis.Client, *redis.ClusterClient and *redis.Ring have it.
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

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
	if len(calls) == 0 {
		return
	}
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
			cmds[i] = pipe.Eval(ctx, c.Source, c.Keys, anys(c.Args)...)
		} else {
			cmds[i] = pipe.EvalSha(ctx, c.SHA, c.Keys, anys(c.Args)...)
		}
	}
	_, execErr := pipe.Exec(ctx)
	for i, cmd := range cmds {
		v, err := cmd.Result()
		if err == nil && v == nil {
			// Never answered: the pipeline failed before this command's
			// reply was read, and go-redis left it unmarked.
			err = execErr
			if err == nil {
				err = errors.New("goredis: pipeline returned no reply")
			}
		}
		v, err = reply(v, err)
		calls[i].Reply, calls[i].Err = v, n.explain(err)
	}
}

// Watch implements driver.Watcher with a go-redis PubSub: SUBSCRIBE channel
// on a connection of its own, and Watch returns once the server has
// confirmed it (or with the error, when ctx ends first or the subscription
// fails). A goroutine then receives the messages and calls notify with each
// one on channel. If the connection is lost, go-redis subscribes again on
// a new one; notify is then called once, since a release may have been
// missed in between. stop closes the PubSub, which ends the goroutine at
// once even when the server does not answer, and waits for it; it may be
// called more than once.
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
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Subscribe sends SUBSCRIBE and keeps the channel even when that
	// fails: Receive then connects again and resubscribes.
	ps := sub.Subscribe(ctx, channel)
	w := &watch{
		ps:        ps,
		channel:   channel,
		notify:    notify,
		confirmed: make(chan struct{}),
		failed:    make(chan error, 1),
		done:      make(chan struct{}),
		closing:   make(chan struct{}),
	}
	go w.run(ctx)
	select {
	case <-w.confirmed:
		return w.stop, nil
	case err = <-w.failed:
	case <-ctx.Done():
		err = ctx.Err()
	}
	w.stop()
	return nil, err
}

// watch is one subscription of Watch.
type watch struct {
	ps        *redis.PubSub
	channel   string
	notify    func(message string)
	confirmed chan struct{} // closed at the first confirmation
	failed    chan error    // the error that ended the goroutine before it
	done      chan struct{} // closed when the goroutine has ended
	closing   chan struct{} // closed by stop
	once      sync.Once
}

// run receives until stop. The first Receive runs under Watch's ctx, so
// its deadline bounds connecting and the confirmation; the others have no
// deadline (the subscription lasts until stop) and end when stop closes
// the PubSub.
func (w *watch) run(ctx context.Context) {
	defer close(w.done)
	confirmed := false
	rctx := ctx
	backoff := driver.MinBackoff
	for {
		msg, err := w.ps.Receive(rctx)
		if err != nil {
			select {
			case <-w.closing:
				return
			default:
			}
			if !confirmed {
				w.failed <- err
				return
			}
			if errors.Is(err, redis.ErrClosed) {
				return // the client was closed: nothing to wait for
			}
			// The connection broke: go-redis connects and subscribes
			// again on the next Receive; pace the attempts while the
			// server is down.
			select {
			case <-w.closing:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, driver.MaxBackoff)
			continue
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind != "subscribe" || m.Channel != w.channel {
				continue
			}
			backoff = driver.MinBackoff
			if !confirmed {
				confirmed = true
				rctx = context.WithoutCancel(ctx)
				close(w.confirmed)
			} else {
				w.notify("") // subscribed again after a lost connection
			}
		case *redis.Message:
			if confirmed && m.Channel == w.channel {
				w.notify(m.Payload)
			}
		}
	}
}

func (w *watch) stop() {
	w.once.Do(func() {
		close(w.closing)
		_ = w.ps.Close()
	})
	<-w.done
}
