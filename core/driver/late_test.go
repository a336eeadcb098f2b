package driver_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core/driver"
)

// bounded is a context for one step of a test that must not hang.
func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A node made within the wait is returned as it is.
func TestLateMadeAtOnce(t *testing.T) {
	n := memory.New()
	l := driver.StartLate("a", false, func(*driver.Late) (driver.Node, error) { return n, nil })
	got, err := l.Await(10 * time.Second)
	require.NoError(t, err)
	assert.Same(t, n, got)

	boom := errors.New("boom")
	_, err = driver.StartLate("b", false, func(*driver.Late) (driver.Node, error) { return nil, boom }).Await(10 * time.Second)
	require.ErrorIs(t, err, boom)

	_, err = driver.StartLate("c", false, func(*driver.Late) (driver.Node, error) { return (*memory.Node)(nil), nil }).Await(10 * time.Second)
	require.ErrorContains(t, err, "c: no node was made", "a typed nil is no node")
}

// plain hides a node's optional capabilities.
type plain struct{ driver.Node }

// A node not made yet: each call waits for it within its context, then
// goes through it, with its capabilities or their fallbacks.
func TestLateWaitsForTheNode(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	for _, tc := range []struct {
		name string
		wrap func(*memory.Node) driver.Node
	}{
		{"capable", func(n *memory.Node) driver.Node { return n }},
		{"plain", func(n *memory.Node) driver.Node { return plain{n} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, made := memory.New(), make(chan struct{})
			l := driver.StartLate("late:1", true, func(*driver.Late) (driver.Node, error) {
				<-made
				return tc.wrap(n), nil
			})
			got, err := l.Await(0)
			require.NoError(t, err)
			require.Same(t, l, got)
			assert.Equal(t, "late:1", l.String())
			assert.True(t, l.Sharded())

			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
			defer cancel()
			_, err = l.SetNX(ctx, "k", "v", time.Minute)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Equal(t, driver.KindContext, l.Classify(err))
			calls := []driver.Call{{Source: driver.ScriptRelease.Source(), Keys: []string{"k"}, Args: []string{"v"}}}
			l.EvalBatch(ctx, calls)
			require.ErrorIs(t, calls[0].Err, context.DeadlineExceeded)
			_, err = l.Watch(ctx, "ch", func(string) {})
			require.ErrorIs(t, err, context.DeadlineExceeded)

			close(made)
			ok, err := l.SetNX(bounded(t), "k", "v", time.Minute)
			require.NoError(t, err)
			assert.True(t, ok)
			reply, err := l.EvalSHA(bounded(t), driver.ScriptRelease.SHA(), []string{"k"}, []string{"v"})
			require.ErrorIs(t, err, memory.ErrNoScript)
			assert.Nil(t, reply)
			assert.Equal(t, driver.KindNoScript, l.Classify(err), "classified by the node made")
			reply, err = l.Eval(bounded(t), driver.ScriptRelease.Source(), []string{"k"}, []string{"v"})
			require.NoError(t, err)
			assert.Equal(t, int64(1), reply)
			calls = []driver.Call{{SHA: driver.ScriptRelease.SHA(), Keys: []string{"k"}, Args: []string{"v"}}}
			l.EvalBatch(bounded(t), calls)
			require.NoError(t, calls[0].Err)
			assert.Equal(t, int64(0), calls[0].Reply)

			stop, err := l.Watch(bounded(t), "ch", func(string) {})
			if tc.name == "plain" {
				require.ErrorIs(t, err, errors.ErrUnsupported)
			} else {
				require.NoError(t, err)
				stop()
			}

			require.NoError(t, l.Close())
			require.NoError(t, l.Close(), "idempotent")
			_, err = l.SetNX(bounded(t), "k", "v", time.Minute)
			require.ErrorIs(t, err, memory.ErrClosed, "the node made was closed")
		})
	}
	require.NoError(t, goleak.Find(ignore))
}

// A node whose making fails after the wait fails every call with its
// error, a node failure.
func TestLateFails(t *testing.T) {
	boom, fail := errors.New("boom"), make(chan struct{})
	l := driver.StartLate("late", false, func(*driver.Late) (driver.Node, error) {
		<-fail
		return nil, boom
	})
	got, err := l.Await(0)
	require.NoError(t, err)
	require.Same(t, l, got)
	close(fail)
	_, err = l.Eval(bounded(t), "return 1", nil, nil)
	require.ErrorIs(t, err, boom)
	assert.Equal(t, driver.KindNodeFailure, l.Classify(err))
	require.NoError(t, l.Close())

	// A build error that wraps a context error (a dialer's own deadline)
	// is still the node's failure, not the call's context.
	dialFailed := fmt.Errorf("dial: %w", context.DeadlineExceeded)
	l = driver.StartLate("late", false, func(*driver.Late) (driver.Node, error) { return nil, dialFailed })
	_, err = l.Await(10 * time.Second)
	require.ErrorIs(t, err, dialFailed)
	_, err = l.SetNX(bounded(t), "k", "v", time.Minute)
	require.ErrorIs(t, err, dialFailed)
	assert.Equal(t, driver.KindNodeFailure, l.Classify(err))
	assert.Equal(t, driver.KindContext, l.Classify(context.Canceled), "a call's own context")
	require.NoError(t, l.Close())
}

// Await(0) returns the node made when build has returned.
func TestLateAwaitZero(t *testing.T) {
	n := memory.New()
	l := driver.StartLate("a", false, func(*driver.Late) (driver.Node, error) { return n, nil })
	_, err := l.Await(10 * time.Second)
	require.NoError(t, err)
	for range 100 {
		got, err := l.Await(0)
		require.NoError(t, err)
		require.Same(t, n, got)
	}
}

// AwaitAll returns every node, made or not, with a closeAll; when a build
// fails within the wait, it closes the others and returns the error.
func TestLateAwaitAll(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	made := memory.New()
	lates := []*driver.Late{
		driver.StartLate("made", false, func(*driver.Late) (driver.Node, error) { return made, nil }),
		driver.StartLate("hung", false, func(l *driver.Late) (driver.Node, error) {
			_, err := l.Dial(context.Background(), func(ctx context.Context) (net.Conn, error) {
				<-ctx.Done() // until closeAll
				return nil, ctx.Err()
			})
			return nil, err
		}),
	}
	nodes, closeAll, err := driver.AwaitAll(lates, 100*time.Millisecond)
	require.NoError(t, err)
	require.Len(t, nodes, 2)
	assert.Same(t, made, nodes[0])
	assert.Same(t, lates[1], nodes[1])
	require.NoError(t, closeAll())
	_, err = made.SetNX(bounded(t), "k", "v", time.Minute)
	require.ErrorIs(t, err, memory.ErrClosed, "closeAll closed the node made")

	boom := errors.New("boom")
	other := memory.New()
	nodes, closeAll, err = driver.AwaitAll([]*driver.Late{
		driver.StartLate("other", false, func(*driver.Late) (driver.Node, error) { return other, nil }),
		driver.StartLate("boom", false, func(*driver.Late) (driver.Node, error) { return nil, boom }),
	}, 10*time.Second)
	require.ErrorIs(t, err, boom)
	assert.Nil(t, nodes)
	assert.Nil(t, closeAll)
	_, err = other.SetNX(bounded(t), "k", "v", time.Minute)
	require.ErrorIs(t, err, memory.ErrClosed, "closed on error")
	require.NoError(t, goleak.Find(ignore))
}

// Close cuts short a connection attempt of the client being made, and a
// handshake on a connection it made with a server that never answers,
// instead of waiting for the client's own timeouts.
func TestLateCloseCutsConnectingShort(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() { // accepts, never answers: a hung server
		if c, err := ln.Accept(); err == nil {
			accepted <- c
		}
	}()

	for _, tc := range []struct {
		name string
		dial func(ctx context.Context, dialing func()) (net.Conn, error)
	}{
		{"handshake", func(ctx context.Context, _ func()) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", ln.Addr().String())
		}},
		{"dial", func(ctx context.Context, dialing func()) (net.Conn, error) {
			dialing()
			<-ctx.Done() // a connection attempt that never completes
			return nil, ctx.Err()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := make(chan struct{})
			dialing := sync.OnceFunc(func() { close(ch) })
			l := driver.StartLate("hung", false, func(l *driver.Late) (driver.Node, error) {
				conn, err := l.Dial(context.Background(), func(ctx context.Context) (net.Conn, error) { return tc.dial(ctx, dialing) })
				if err != nil {
					return nil, err
				}
				defer conn.Close()
				dialing() // the connection is made: the handshake begins
				_, err = conn.Read(make([]byte, 1))
				return nil, err
			})
			select {
			case <-ch:
			case <-bounded(t).Done():
				t.Fatal("the connection attempt never began")
			}
			closed := make(chan error, 1)
			go func() { closed <- l.Close() }()
			select {
			case err := <-closed:
				require.NoError(t, err)
			case <-bounded(t).Done():
				t.Fatal("Close waited for the hung server")
			}
			_, err := l.SetNX(bounded(t), "k", "v", time.Minute)
			require.Error(t, err)
			assert.NotErrorIs(t, err, context.Canceled, "not the call's context")
			assert.Equal(t, driver.KindNodeFailure, l.Classify(err))
			if tc.name == "dial" {
				require.ErrorIs(t, err, driver.ErrAborted)
			}
			_, err = l.Dial(bounded(t), func(ctx context.Context) (net.Conn, error) { return tc.dial(ctx, func() {}) })
			require.ErrorIs(t, err, driver.ErrAborted, "no connection after Close")
		})
	}
	(<-accepted).Close()
	require.NoError(t, goleak.Find(ignore))
}

// Once the node is made, its client's connections are its own: Dial runs
// the attempt as it is, and Close leaves the connection to the node.
func TestLateDialAfterMade(t *testing.T) {
	type key struct{}
	client, server := net.Pipe()
	defer server.Close()
	l := driver.StartLate("made", false, func(*driver.Late) (driver.Node, error) { return memory.New(), nil })
	_, err := l.Await(10 * time.Second)
	require.NoError(t, err)
	ctx := context.WithValue(bounded(t), key{}, "mine")
	conn, err := l.Dial(ctx, func(got context.Context) (net.Conn, error) {
		assert.Equal(t, "mine", got.Value(key{}))
		return client, nil
	})
	require.NoError(t, err)
	require.NoError(t, l.Close())
	require.NoError(t, conn.SetDeadline(time.Now().Add(time.Millisecond)))
	_, err = conn.Read(make([]byte, 1))
	var ne net.Error
	require.ErrorAs(t, err, &ne, "open, not closed by Close")
	assert.True(t, ne.Timeout())
	require.NoError(t, conn.Close())
}
