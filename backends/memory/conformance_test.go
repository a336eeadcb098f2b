package memory_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/conformance"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// TestConformance runs the suite with the full strategy × size matrix:
// memory is the reference backend, and the matrix is cheap on it.
func TestConformance(t *testing.T) {
	t.Run("memory/in-process", func(t *testing.T) {
		conformance.Run(t, func(*testing.T) conformance.Harness { return &harness{} }, conformance.WithFullMatrix())
	})
}

// harness serves memory nodes to the conformance suite. A memory.Node is
// both the store and the connection to it, so tests get handles: closing a
// handle (as Locker.Close does) leaves the shared store to the other tests.
type harness struct {
	mu     sync.Mutex
	shared []*memory.Node
}

func (h *harness) Shared(_ *testing.T, n int) conformance.Servers {
	h.mu.Lock()
	defer h.mu.Unlock()
	for len(h.shared) < n {
		h.shared = append(h.shared, memory.New())
	}
	return &servers{list: h.shared[:n], shared: true}
}

func (h *harness) Isolated(_ *testing.T, n int) conformance.Servers {
	return &servers{list: memory.NewNodes(n), keep: make([]bool, n)}
}

func (h *harness) ClosedNode(*testing.T) core.Node {
	n := memory.New()
	_ = n.Close()
	return n
}

func (h *harness) Close() error { return nil }

type servers struct {
	list   []*memory.Node
	shared bool

	mu   sync.Mutex
	keep []bool // per node: stopped with StopKeepingData
}

func (s *servers) Len() int { return len(s.list) }

func (s *servers) Nodes(*testing.T) []core.Node {
	out := make([]core.Node, len(s.list))
	for i, n := range s.list {
		out[i] = &handle{Node: n}
	}
	return out
}

func (s *servers) Get(_ context.Context, i int, key string) (string, time.Duration, bool, error) {
	v, ttl, ok := s.list[i].Get(key)
	return v, ttl, ok, nil
}

func (s *servers) Set(_ context.Context, i int, key, value string, ttl time.Duration) error {
	s.list[i].Set(key, value, ttl)
	return nil
}

func (s *servers) Del(_ context.Context, i int, key string) error {
	s.list[i].Del(key)
	return nil
}

func (s *servers) fault(i int, f func(*memory.Node)) error {
	if s.shared {
		return conformance.ErrShared
	}
	f(s.list[i])
	return nil
}

func (s *servers) FlushScripts(_ context.Context, i int) error {
	return s.fault(i, (*memory.Node).FlushScripts)
}
func (s *servers) Stop(i int) error { return s.fault(i, func(n *memory.Node) { s.stop(i, n, false) }) }

func (s *servers) StopKeepingData(i int) error {
	return s.fault(i, func(n *memory.Node) { s.stop(i, n, true) })
}

func (s *servers) stop(i int, n *memory.Node, keep bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n.Stop()
	s.keep[i] = keep
}

func (s *servers) Start(i int) error {
	return s.fault(i, func(n *memory.Node) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.keep[i] {
			n.StartKeepingData()
		} else {
			n.Start()
		}
		s.keep[i] = false
	})
}

func (s *servers) Pause(i int) error  { return s.fault(i, (*memory.Node).Pause) }
func (s *servers) Resume(i int) error { return s.fault(i, (*memory.Node).Resume) }

// handle is one test's connection to a shared memory node.
type handle struct {
	*memory.Node
	closed atomic.Bool
}

func (h *handle) Close() error { h.closed.Store(true); return nil }

func (h *handle) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if h.closed.Load() {
		return false, memory.ErrClosed
	}
	return h.Node.SetNX(ctx, key, value, ttl)
}

func (h *handle) EvalSHA(ctx context.Context, sha string, keys, args []string) (any, error) {
	if h.closed.Load() {
		return nil, memory.ErrClosed
	}
	return h.Node.EvalSHA(ctx, sha, keys, args)
}

func (h *handle) Eval(ctx context.Context, script string, keys, args []string) (any, error) {
	if h.closed.Load() {
		return nil, memory.ErrClosed
	}
	return h.Node.Eval(ctx, script, keys, args)
}

func (h *handle) EvalBatch(ctx context.Context, calls []driver.Call) {
	if h.closed.Load() {
		for i := range calls {
			calls[i].Err = memory.ErrClosed
		}
		return
	}
	h.Node.EvalBatch(ctx, calls)
}

func (h *handle) Watch(ctx context.Context, channel string, notify func(message string)) (func(), error) {
	if h.closed.Load() {
		return nil, memory.ErrClosed
	}
	return h.Node.Watch(ctx, channel, notify)
}
