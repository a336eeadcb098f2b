package driver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// ErrAborted fails the connection attempts of a Late node's client that
// the node's Close cut short, and what they would have made.
var ErrAborted = errors.New("quorumlock: the node was closed while its client was connecting")

// Late is a Node that stands for one still being made: the Dial of a
// backend whose client connects when it is made (rueidis, valkey-go), and
// may take its whole dial timeout over a hung server, returns a Late for
// that server instead of waiting for it. Each call waits for the node
// within its own context (to core, a server that does not answer), then
// goes through it; Close cuts the making short, waits for it to end and
// closes the node made, if any.
//
// Late implements Batcher and Watcher (through the node made, or with
// EvalEach and errors.ErrUnsupported when it lacks them) and Sharded.
type Late struct {
	name    string
	sharded bool
	ctx     context.Context // ends at Close
	cancel  context.CancelFunc
	done    chan struct{} // closed once build has returned: node or err set
	node    Node
	err     error
	once    sync.Once
	mu      sync.Mutex // guards making, conns and the end of ctx
	making  bool
	conns   []net.Conn // made by Dial while making
}

var (
	_ Batcher = (*Late)(nil)
	_ Watcher = (*Late)(nil)
	_ Sharded = (*Late)(nil)
)

// StartLate runs build on a goroutine of its own and returns the node
// that stands for the one build returns, named name, reporting sharded
// from Sharded. build returns a node or an error. Its client should
// connect through the Late's Dial, so that Close can cut its connection
// attempts short. The node it returns must close its client on Close, and
// refuse the calls that come after (Late still forwards them).
func StartLate(name string, sharded bool, build func(*Late) (Node, error)) *Late {
	ctx, cancel := context.WithCancel(context.Background())
	l := &Late{name: name, sharded: sharded, ctx: ctx, cancel: cancel, done: make(chan struct{}), making: true}
	go func() {
		defer close(l.done)
		node, err := build(l)
		l.mu.Lock()
		l.making, l.conns = false, nil // the client's from now on
		l.mu.Unlock()
		switch {
		case err != nil:
			l.err = err
		case IsNil(node):
			l.err = fmt.Errorf("%s: no node was made", name)
		default:
			l.node = node
		}
	}()
	return l
}

// Await waits at most d for build to return, and returns the node it made
// or its error; when it has not returned by then, Await returns l.
func (l *Late) Await(d time.Duration) (Node, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.done:
	case <-t.C:
		select {
		case <-l.done: // made just in time
		default:
			return l, nil
		}
	}
	if l.err != nil {
		return nil, l.err
	}
	return l.node, nil
}

// Dial runs dial, a connection attempt of the client build is making, with
// ctx. While build runs, the attempt ends at Close, and a connection it
// made is closed at Close, so that a handshake with a hung server fails at
// once; either way the attempt fails with ErrAborted. Once build has
// returned, dial runs as it is, its connections the client's.
func (l *Late) Dial(ctx context.Context, dial func(context.Context) (net.Conn, error)) (net.Conn, error) {
	l.mu.Lock()
	making, aborted := l.making, l.ctx.Err() != nil
	l.mu.Unlock()
	switch {
	case aborted:
		return nil, ErrAborted
	case !making:
		return dial(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(l.ctx, cancel)()
	conn, err := dial(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.ctx.Err() != nil:
		if conn != nil {
			_ = conn.Close()
		}
		return nil, ErrAborted
	case err == nil && l.making:
		l.conns = append(l.conns, conn)
	}
	return conn, err
}

// DialFunc returns a ClientOption.DialCtxFn of rueidis or valkey-go for
// the client that build makes, running through Dial: the client's own
// dialCtx, or else its dial (the older DialFn, which takes no context),
// or else a dial of TCP, with TLS when cfg is set.
func (l *Late) DialFunc(dialCtx func(ctx context.Context, dst string, d *net.Dialer, cfg *tls.Config) (net.Conn, error),
	dial func(dst string, d *net.Dialer, cfg *tls.Config) (net.Conn, error)) func(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error) {
	return func(ctx context.Context, dst string, d *net.Dialer, cfg *tls.Config) (net.Conn, error) {
		return l.Dial(ctx, func(ctx context.Context) (net.Conn, error) {
			switch {
			case dialCtx != nil:
				return dialCtx(ctx, dst, d, cfg)
			case dial != nil:
				return dial(dst, d, cfg)
			case cfg != nil:
				return (&tls.Dialer{NetDialer: d, Config: cfg}).DialContext(ctx, "tcp", dst)
			}
			return d.DialContext(ctx, "tcp", dst)
		})
	}
}

// AwaitAll waits for every Late of lates, d at most in all, and returns
// what each Await returns (the node made, or the Late itself) and a
// closeAll of them (CloseAll); when a build has failed within the wait,
// it closes them all and returns their errors, joined: a Dial's result.
func AwaitAll(lates []*Late, d time.Duration) (nodes []Node, closeAll func() error, err error) {
	deadline := time.Now().Add(d)
	nodes = make([]Node, len(lates))
	var errs []error
	for i, l := range lates {
		if nodes[i], err = l.Await(time.Until(deadline)); err != nil {
			nodes[i], errs = l, append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		_ = CloseAll(nodes)()
		return nil, nil, err
	}
	return nodes, CloseAll(nodes), nil
}

// ready waits within ctx for the node.
func (l *Late) ready(ctx context.Context) (Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case <-l.done:
		return l.node, l.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// SetNX implements Node.
func (l *Late) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	n, err := l.ready(ctx)
	if err != nil {
		return false, err
	}
	return n.SetNX(ctx, key, value, ttl)
}

// EvalSHA implements Node.
func (l *Late) EvalSHA(ctx context.Context, sha string, keys, args []string) (any, error) {
	n, err := l.ready(ctx)
	if err != nil {
		return nil, err
	}
	return n.EvalSHA(ctx, sha, keys, args)
}

// Eval implements Node.
func (l *Late) Eval(ctx context.Context, script string, keys, args []string) (any, error) {
	n, err := l.ready(ctx)
	if err != nil {
		return nil, err
	}
	return n.Eval(ctx, script, keys, args)
}

// EvalBatch implements Batcher: through the node's EvalBatch, or one by
// one (EvalEach) when it has none.
func (l *Late) EvalBatch(ctx context.Context, calls []Call) {
	n, err := l.ready(ctx)
	switch b, ok := n.(Batcher); {
	case err != nil:
		FailAll(calls, err)
	case ok:
		b.EvalBatch(ctx, calls)
	default:
		EvalEach(ctx, n, calls)
	}
}

// Watch implements Watcher: through the node's Watch, or with an error
// matching errors.ErrUnsupported when it has none.
func (l *Late) Watch(ctx context.Context, channel string, notify func(message string)) (stop func(), err error) {
	n, err := l.ready(ctx)
	if err != nil {
		return nil, err
	}
	if w, ok := n.(Watcher); ok {
		return w.Watch(ctx, channel, notify)
	}
	return nil, fmt.Errorf("%s: %T cannot watch: %w", l.name, n, errors.ErrUnsupported)
}

// Classify implements Node: as the node made does, once it is made;
// build's error is KindNodeFailure, whatever it wraps; other context
// errors are KindContext, and the rest KindNodeFailure.
func (l *Late) Classify(err error) ErrorKind {
	select {
	case <-l.done:
		if l.node != nil {
			return l.node.Classify(err)
		}
		if errors.Is(err, l.err) {
			return KindNodeFailure
		}
	default:
	}
	return Classification(err, false)
}

// Sharded implements Sharded with the value given to StartLate.
func (l *Late) Sharded() bool { return l.sharded }

// String returns the name given to StartLate.
func (l *Late) String() string { return l.name }

// Close cuts build's connection attempts short (see Dial), waits for it to
// return and closes the node it made; later calls return nil at once.
func (l *Late) Close() error {
	var err error
	l.once.Do(func() {
		l.mu.Lock()
		l.cancel()
		conns := l.conns
		l.conns = nil
		l.mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
		<-l.done
		if l.node != nil {
			err = l.node.Close()
		}
	})
	return err
}
