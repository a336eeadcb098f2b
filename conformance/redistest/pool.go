package redistest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/core/driver"
)

// resetTimeout bounds one reset of a pooled target: a restart, a cluster
// settling after a master came back, and the flush.
const resetTimeout = 60 * time.Second

// pool keeps the targets that tests have used, to hand them to later tests
// once reset to what a newly started target is. A target goes back to the
// pool when its test ends and is reset in the background; take hands out
// only reset targets, and starts new ones when there are too few. Its
// methods are safe for concurrent use.
type pool struct {
	start func(ctx context.Context) (target, error)

	mu     sync.Mutex
	idle   []target
	all    []target // every target started and not yet closed
	errs   []error  // resets that failed, reported by close
	closed bool
	resets sync.WaitGroup
}

func newPool(start func(ctx context.Context) (target, error)) *pool {
	return &pool{start: start}
}

// take returns n targets, reset ones first; on error it returns those it
// has, for the caller to give back.
func (p *pool) take(ctx context.Context, n int) ([]target, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("redistest: the server pool is closed")
	}
	k := min(n, len(p.idle))
	list := slices.Clone(p.idle[len(p.idle)-k:])
	p.idle = p.idle[:len(p.idle)-k]
	p.mu.Unlock()

	started, err := startAll(ctx, p.start, n-k)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed { // close ran meanwhile and would never stop these
		for _, tg := range started {
			_ = tg.close()
		}
		return list, errors.Join(err, errors.New("redistest: the server pool was closed while it started servers"))
	}
	p.all = append(p.all, started...)
	return append(list, started...), err
}

// give hands list back when its test has ended (every client the test
// made is closed): each target is reset in the background, then kept for
// a later take. A target whose reset fails is closed, and the failure
// reported by close. After close, give closes the targets.
func (p *pool) give(list []target) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, tg := range list {
			_ = tg.close()
		}
		return
	}
	for _, tg := range list {
		p.resets.Add(1)
		go func() {
			defer p.resets.Done()
			ctx, cancel := context.WithTimeout(context.Background(), resetTimeout)
			defer cancel()
			err := tg.reset(ctx)
			p.mu.Lock()
			defer p.mu.Unlock()
			if err == nil && !p.closed {
				p.idle = append(p.idle, tg)
				return
			}
			if err != nil {
				p.errs = append(p.errs, fmt.Errorf("redistest: resetting %v for reuse: %w", tg.addrs(), err))
			}
			p.all = slices.DeleteFunc(p.all, func(o target) bool { return o == tg })
			_ = tg.close()
		}()
	}
}

// close waits for the resets under way and stops every target the pool
// started. It is idempotent.
func (p *pool) close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.resets.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	errs := p.errs
	for _, tg := range p.all {
		errs = append(errs, tg.close())
	}
	p.all, p.idle, p.errs = nil, nil, nil
	return errors.Join(errs...)
}

// startAll starts n targets at once; on error it returns those it started.
func startAll(ctx context.Context, start func(context.Context) (target, error), n int) ([]target, error) {
	list := make([]target, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range list {
		wg.Add(1)
		go func() {
			defer wg.Done()
			list[i], errs[i] = start(ctx)
		}()
	}
	wg.Wait()
	return slices.DeleteFunc(list, func(tg target) bool { return tg == nil }), errors.Join(errs...)
}

// fingerprint is what a server's configuration is (CONFIG GET * and ACL
// LIST), to tell whether a test changed it.
func fingerprint(ctx context.Context, c *redis.Client) (string, error) {
	conf, err := c.ConfigGet(ctx, "*").Result()
	if err != nil {
		return "", fmt.Errorf("CONFIG GET: %w", err)
	}
	acl, err := c.Do(ctx, "acl", "list").StringSlice()
	if err != nil {
		return "", fmt.Errorf("ACL LIST: %w", err)
	}
	lines := make([]string, 0, len(conf)+len(acl))
	for k, v := range conf {
		lines = append(lines, k+" "+v)
	}
	slices.Sort(lines)
	return strings.Join(append(lines, acl...), "\n"), nil
}

// scrub empties a running server as a new one is: it closes the
// connections of other clients (a test's own are closed before; what a
// paused server read before it was paused has run by now, since it was
// read first), then empties every database, the script and function
// caches and the statistics. With adopt, it marks the server adopted for
// the restart guard, as StartServer does.
func scrub(ctx context.Context, addr string, adopt bool) error {
	c := plainClient(addr)
	defer c.Close()
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ClientKillByFilter(ctx, "type", "normal", "skipme", "yes")
		p.ClientKillByFilter(ctx, "type", "pubsub")
		p.FlushAll(ctx)
		p.ScriptFlush(ctx)
		p.FunctionFlush(ctx)
		p.ConfigResetStat(ctx)
		if adopt {
			p.Set(ctx, driver.BirthKey, "0", 0)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("scrubbing %s: %w", addr, err)
	}
	return nil
}

// renew makes s what a new server is: revived, then scrubbed.
func renew(ctx context.Context, s *Server, want string, adopt bool) error {
	if err := revive(ctx, s, want); err != nil {
		return err
	}
	return scrub(ctx, s.Addr(), adopt)
}

// revive brings s back as a new server is, short of a scrub: resumed if
// paused, and started again, empty, if it is stopped or its configuration
// is not want (a test changed it, or set a password).
func revive(ctx context.Context, s *Server, want string) error {
	if err := s.Resume(); err != nil {
		return err
	}
	if s.Running() {
		if got, err := configOf(ctx, s.Addr()); err == nil && got == want {
			return nil
		}
	}
	return s.restartEmpty(ctx)
}

// restartEmpty starts s again without the data a StopKeepingData saved.
func (s *Server) restartEmpty(ctx context.Context) error {
	if err := s.Stop(); err != nil {
		return err
	}
	return s.Restart(ctx)
}

// configOf returns the fingerprint of the server at addr.
func configOf(ctx context.Context, addr string) (string, error) {
	c := plainClient(addr)
	defer c.Close()
	return fingerprint(ctx, c)
}
