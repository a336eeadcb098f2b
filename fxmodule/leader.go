package fxmodule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"go.uber.org/fx"

	"github.com/quorumlock/quorumlock/core"
)

// LeaderHook runs the fx.Hook that constructor returns only while this app
// leads key (core.Locker.Campaign, with the value HOST:PID), so that one
// app of a fleet runs it at a time. constructor is an fx constructor, with
// any parameters from the graph, that returns an fx.Hook (an error may
// follow):
//
//	fxmodule.LeaderHook("scheduler", func(s *Scheduler) fx.Hook {
//		return fx.Hook{OnStart: s.Start, OnStop: s.Stop}
//	})
//
// Once the app has started, it campaigns in the background. When it leads,
// OnStart runs with a context that ends when leadership is lost or the app
// stops. When leadership is lost or at risk (the Lock's Done), OnStop runs
// with a context that ends when the term's validity does, which is when
// another app may lead: stop by then. The app then campaigns again. When
// the app stops, OnStop runs with the stop context and the app resigns;
// the app's stop waits for both, and for the campaign to end.
//
// An error from OnStart, while the app still leads, shuts the app down
// (fx.Shutdowner, exit code 1), as a failing OnStart fails an app's start;
// the app resigns first. Errors of the campaign are logged through the
// graph's *slog.Logger and the campaign goes on a second later; an error
// from OnStop when leadership is lost is logged, and one when the app stops
// is the stop's.
func LeaderHook(key string, constructor any) fx.Option {
	if key == "" {
		return fx.Error(invalidConfig(errors.New("fxmodule: LeaderHook: key is empty")))
	}
	return fx.Module("quorumlock.leader",
		// Private: each LeaderHook's fx.Hook is its own.
		fx.Provide(constructor, fx.Private),
		fx.Invoke(func(p leaderParams) {
			c := &campaign{key: key, value: leaderValue(), p: p, done: make(chan struct{})}
			p.Lifecycle.Append(fx.Hook{OnStart: c.start, OnStop: c.stop})
		}),
	)
}

// leaderParams are what a LeaderHook's campaign needs from the graph.
type leaderParams struct {
	fx.In

	Lifecycle  fx.Lifecycle
	Shutdowner fx.Shutdowner
	Locker     *core.Locker
	Hook       fx.Hook
	Logger     *slog.Logger `optional:"true"`
}

// leaderValue is the value a LeaderHook's leader shows: HOST:PID.
func leaderValue() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

// campaignPause is how long a LeaderHook's campaign waits after an error
// before it campaigns again.
const campaignPause = time.Second

// campaign is one LeaderHook's campaign: a goroutine from the app's start
// to its stop.
type campaign struct {
	key, value string
	p          leaderParams

	ctx     context.Context // ends when the app stops
	cancel  context.CancelFunc
	stopCtx context.Context // the app's stop context, set before cancel
	stopErr error           // OnStop's error at the app's stop
	done    chan struct{}   // closed when the goroutine ends
}

func (c *campaign) log() *slog.Logger {
	if c.p.Logger != nil {
		return c.p.Logger
	}
	return slog.Default()
}

func (c *campaign) start(context.Context) error {
	c.ctx, c.cancel = context.WithCancel(context.Background())
	go c.run()
	return nil
}

// stop ends the campaign and, if this app leads, runs OnStop within ctx
// and resigns. It waits for the campaign's goroutine until ctx ends.
func (c *campaign) stop(ctx context.Context) error {
	c.stopCtx = ctx
	c.cancel()
	select {
	case <-c.done:
		return c.stopErr
	case <-ctx.Done():
		return fmt.Errorf("fxmodule: LeaderHook %q: OnStop or the resignation did not end within the stop context: %w", c.key, ctx.Err())
	}
}

// run campaigns, leads, and campaigns again, until the app stops.
func (c *campaign) run() {
	defer close(c.done)
	for c.ctx.Err() == nil {
		lock, err := c.p.Locker.Campaign(c.ctx, c.key, c.value)
		switch {
		case c.ctx.Err() != nil:
			if lock != nil {
				c.resign(lock, context.Background())
			}
			return
		case errors.Is(err, core.ErrInvalidArgument) || errors.Is(err, core.ErrClosed):
			c.fail(fmt.Errorf("fxmodule: LeaderHook %q: %w", c.key, err))
			return
		case err != nil:
			c.log().WarnContext(c.ctx, "quorumlock: campaign failed, standing again", "key", c.key, "err", err)
			select {
			case <-c.ctx.Done():
			case <-time.After(campaignPause):
			}
			continue
		}
		if !c.lead(lock) {
			return
		}
	}
}

// lead runs the hook while lock, a term, holds, and resigns. It reports
// whether to campaign again: not once the app stops or fails.
func (c *campaign) lead(lock *core.Lock) bool {
	if c.p.Hook.OnStart != nil {
		// OnStart may keep its context (a scheduler's loop): it lives as
		// long as the term, or the app.
		ctx, cancel := lock.Context(c.ctx)
		defer cancel()
		err := c.p.Hook.OnStart(ctx)
		if err != nil && c.ctx.Err() == nil && lock.Err() == nil {
			c.resign(lock, context.Background())
			c.fail(fmt.Errorf("fxmodule: LeaderHook %q: OnStart: %w", c.key, err))
			return false
		}
		if err != nil { // the term or the app ended under it: not started
			c.resign(lock, c.stopOr(context.Background()))
			return c.ctx.Err() == nil
		}
	}
	select {
	case <-lock.Done():
	case <-c.ctx.Done():
	}
	if c.ctx.Err() != nil { // the app stops, even if the term ended as it did
		c.stopErr = c.onStop(c.stopCtx)
		c.resign(lock, c.stopCtx)
		return false
	}
	ctx, cancel := context.WithTimeout(c.ctx, lock.Validity())
	err := c.onStop(ctx)
	cancel()
	if err != nil {
		c.log().WarnContext(c.ctx, "quorumlock: leadership lost; OnStop failed", "key", c.key, "err", err)
	}
	c.resign(lock, context.Background())
	return c.ctx.Err() == nil
}

// stopOr is the app's stop context once the app stops, else ctx.
func (c *campaign) stopOr(ctx context.Context) context.Context {
	if c.ctx.Err() != nil {
		return c.stopCtx
	}
	return ctx
}

func (c *campaign) onStop(ctx context.Context) error {
	if c.p.Hook.OnStop == nil {
		return nil
	}
	return c.p.Hook.OnStop(ctx)
}

// resign releases lock within ctx and the Locker's node timeouts; a lock
// already lost has nothing to release.
func (c *campaign) resign(lock *core.Lock, ctx context.Context) {
	if err := lock.Release(ctx); err != nil && !errors.Is(err, core.ErrNotHeld) && lock.Err() == nil {
		c.log().WarnContext(ctx, "quorumlock: resignation failed; the term ends within its TTL", "key", c.key, "err", err)
	}
}

// fail logs err and shuts the app down with exit code 1.
func (c *campaign) fail(err error) {
	c.log().ErrorContext(c.ctx, "quorumlock: leader hook failed; shutting the app down", "key", c.key, "err", err)
	if serr := c.p.Shutdowner.Shutdown(fx.ExitCode(1)); serr != nil {
		c.log().ErrorContext(c.ctx, "quorumlock: cannot shut the app down", "err", serr)
	}
}
