package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/conformance"
	"github.com/quorumlock/quorumlock/core"
)

// NodeFactory makes a node of the backend under test for the server at
// addr, and returns a function that closes what it made (its client).
type NodeFactory func(addr string) (node core.Node, closeClient func() error, err error)

// RequireServer fails the test when no redis-server binary is available
// and CI is set, and skips it otherwise: a missing server must never pass
// as a green CI run.
func RequireServer(t testing.TB) {
	t.Helper()
	if _, err := Binary(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v (CI is set, so this is a failure, not a skip)", err)
		}
		t.Skip(err)
	}
}

// Harness returns a conformance.HarnessMaker that runs the suite against
// real redis-server processes on free loopback ports, reached through the
// nodes that factory makes.
func Harness(factory NodeFactory) conformance.HarnessMaker {
	return func(t *testing.T) conformance.Harness {
		RequireServer(t)
		return &harness{factory: factory}
	}
}

type harness struct {
	factory NodeFactory

	mu     sync.Mutex
	shared []*server // started on first use, stopped by Close
}

// server is a redis-server with a control client that bypasses the
// backend under test.
type server struct {
	*Server
	control *redis.Client
}

func startServer(ctx context.Context) (*server, error) {
	s, err := StartServer(ctx)
	if err != nil {
		return nil, err
	}
	return &server{Server: s, control: redis.NewClient(&redis.Options{
		Addr:                  s.Addr(),
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		PoolSize:              16,
	})}, nil
}

func (s *server) close() error {
	return errors.Join(s.control.Close(), s.Server.Close())
}

func (h *harness) Shared(t *testing.T, n int) conformance.Servers {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for len(h.shared) < n {
		s, err := startServer(t.Context())
		require.NoError(t, err)
		h.shared = append(h.shared, s)
	}
	return &servers{h: h, list: h.shared[:n], shared: true}
}

func (h *harness) Isolated(t *testing.T, n int) conformance.Servers {
	t.Helper()
	list := make([]*server, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range list {
		wg.Add(1)
		go func() {
			defer wg.Done()
			list[i], errs[i] = startServer(t.Context())
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, s := range list {
			if s != nil {
				_ = s.close()
			}
		}
	})
	require.NoError(t, errors.Join(errs...))
	return &servers{h: h, list: list}
}

func (h *harness) ClosedNode(t *testing.T) core.Node {
	s := h.Shared(t, 1).(*servers)
	node, closeClient, err := h.factory(s.list[0].Addr())
	require.NoError(t, err)
	require.NoError(t, closeClient())
	return node
}

func (h *harness) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var errs []error
	for _, s := range h.shared {
		errs = append(errs, s.close())
	}
	h.shared = nil
	return errors.Join(errs...)
}

type servers struct {
	h      *harness
	list   []*server
	shared bool
}

func (s *servers) Len() int { return len(s.list) }

func (s *servers) Nodes(t *testing.T) []core.Node {
	t.Helper()
	nodes := make([]core.Node, len(s.list))
	for i, srv := range s.list {
		n, closeClient, err := s.h.factory(srv.Addr())
		require.NoError(t, err)
		t.Cleanup(func() { _ = closeClient() })
		nodes[i] = n
	}
	return nodes
}

func (s *servers) Get(ctx context.Context, i int, key string) (string, time.Duration, bool, error) {
	c := s.list[i].control
	var get *redis.StringCmd
	var pttl *redis.DurationCmd
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, key)
		pttl = p.PTTL(ctx, key)
		return nil
	})
	switch {
	case errors.Is(get.Err(), redis.Nil):
		return "", 0, false, nil
	case err != nil:
		return "", 0, false, fmt.Errorf("redistest: GET on %s: %w", s.list[i].Addr(), err)
	}
	ttl := pttl.Val()
	if ttl < 0 {
		ttl = 0 // -1: no expiry
	}
	return get.Val(), ttl, true, nil
}

func (s *servers) Set(ctx context.Context, i int, key, value string, ttl time.Duration) error {
	args := []any{"set", key, value}
	if ttl > 0 {
		args = append(args, "px", ttl.Milliseconds())
	}
	if err := s.list[i].control.Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("redistest: SET on %s: %w", s.list[i].Addr(), err)
	}
	return nil
}

func (s *servers) FlushScripts(ctx context.Context, i int) error {
	if s.shared {
		return conformance.ErrShared
	}
	return s.list[i].control.ScriptFlush(ctx).Err()
}

func (s *servers) fault(i int, f func(*Server) error) error {
	if s.shared {
		return conformance.ErrShared
	}
	return f(s.list[i].Server)
}

func (s *servers) Stop(i int) error { return s.fault(i, (*Server).Stop) }

func (s *servers) Start(i int) error {
	return s.fault(i, func(srv *Server) error { return srv.Restart(context.Background()) })
}

func (s *servers) Pause(i int) error  { return s.fault(i, (*Server).Pause) }
func (s *servers) Resume(i int) error { return s.fault(i, (*Server).Resume) }
