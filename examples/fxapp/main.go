// Fxapp shows quorumlock in a go.uber.org/fx application, through package
// fxmodule:
//
//	go run ./examples/fxapp
//
// The Locker's Config comes from QUORUMLOCK_... environment variables
// (fxmodule.ConfigFromEnv; see its doc for the list). Every variable is
// optional: when QUORUMLOCK_ADDRS is unset the program uses REDIS_ADDRS,
// as the other examples do, and when both are unset it starts three
// in-process Redis servers (miniredis, reached over real TCP) and puts
// their addresses in the Config before the app is built. The driver is
// the module's default, rueidis, unless QUORUMLOCK_DRIVER says otherwise.
//
// The app is fxmodule.Module, the Config (fx.Supply), a *slog.Logger, and
// the middleware/logging observer contributed through the module's options
// value group (fxmodule.Option), so that every acquisition and release is
// logged. An OnStart hook runs a job under a lock with Locker.Do and checks,
// from inside, that the lock is held (a second TryAcquire is refused). The
// program starts and stops the app itself (app.Start and app.Stop, each
// bounded by a timeout) instead of app.Run, which would wait for a signal,
// and checks that stopping closed the Locker.
//
// Other configurations, for instance:
//
//	QUORUMLOCK_TTL=5s go run ./examples/fxapp
//	QUORUMLOCK_ADDRS=10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379 go run ./examples/fxapp
//
// It exits 0 when everything behaved as expected, and 1 otherwise.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"go.uber.org/fx"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/examples/internal/demo"
	"github.com/quorumlock/quorumlock/fxmodule"
	// The drivers QUORUMLOCK_DRIVER may name: a program imports only the
	// ones it configures, and downloads no other.
	_ "github.com/quorumlock/quorumlock/fxmodule/goredis"
	_ "github.com/quorumlock/quorumlock/fxmodule/redigo"
	_ "github.com/quorumlock/quorumlock/fxmodule/rueidis"
	_ "github.com/quorumlock/quorumlock/fxmodule/valkey"
	"github.com/quorumlock/quorumlock/middleware/logging"
)

// key is the lock the start-up job runs under.
const key = "fxapp:migrations"

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if err := run(ctx, os.Stdout, demo.ParseAddrs(os.Getenv("REDIS_ADDRS"))); err != nil {
		fmt.Fprintln(os.Stderr, "fxapp: FAILED:", err)
		os.Exit(1)
	}
}

// run reads the Config from the environment, fills in the addresses
// (addrs, from REDIS_ADDRS, or embedded servers) when QUORUMLOCK_ADDRS is
// unset, then starts and stops the app.
func run(ctx context.Context, out io.Writer, addrs []string) error {
	cfg, err := fxmodule.ConfigFromEnv(fxmodule.DefaultEnvPrefix)
	if err != nil {
		return err
	}
	where := "QUORUMLOCK_ADDRS"
	if len(cfg.Addrs) == 0 {
		servers, err := demo.Start(addrs, 3)
		if err != nil {
			return err
		}
		defer servers.Close() // after the app has stopped: defers run last first
		where = "REDIS_ADDRS (QUORUMLOCK_ADDRS is unset)"
		if servers.Embedded() {
			where = servers.Where() + " (QUORUMLOCK_ADDRS and REDIS_ADDRS are unset)"
		}
		cfg.Addrs = servers.Addrs()
	}
	driver := cfg.Driver
	if driver == "" {
		driver = fxmodule.DefaultDriver + " (the default)"
	}
	fmt.Fprintf(out, "quorumlock fxapp: Config from QUORUMLOCK_* variables; servers from %s\n", where)
	fmt.Fprintf(out, "  driver %s, %d nodes: %s\n", driver, len(cfg.Addrs), strings.Join(cfg.Addrs, ", "))

	// The log records go to out, and to logs for the check at the end.
	var logs syncBuffer
	app, locker := newApp(out, cfg, newLogger(io.MultiWriter(out, &logs)))
	if err := app.Err(); err != nil {
		return fmt.Errorf("building the app: %w", err)
	}
	if err := startAndStop(ctx, out, app); err != nil {
		return err
	}
	if err := checkClosed(ctx, out, locker); err != nil {
		return err
	}
	if err := checkLogged(logs.String()); err != nil {
		return err
	}
	fmt.Fprintln(out, "\nfxapp: all checks passed")
	return nil
}

// newLogger returns the logger of the logging observer, writing to w. The
// observer logs successes and contention at Debug, so the handler shows
// Debug. To keep lines short: no time, and not the per-node results that
// failed operations carry (group "nodes").
func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey || len(groups) > 0 && groups[0] == "nodes" {
				return slog.Attr{}
			}
			return a
		},
	}))
}

// newApp builds the app: fxmodule.Module with cfg, the logging observer
// through the module's options value group, and an OnStart hook that runs
// job. It returns the app, and its Locker (nil when building failed:
// app.Err says why).
func newApp(out io.Writer, cfg fxmodule.Config, logger *slog.Logger) (*fx.App, *core.Locker) {
	var locker *core.Locker
	app := fx.New(
		fx.NopLogger, // fx's own event log would drown the narration
		fxmodule.Module,
		fx.Supply(cfg, logger),
		// middleware/logging, through the module's options value group.
		fxmodule.Option(func(log *slog.Logger) core.Option {
			return core.WithObserver(logging.New(log))
		}),
		fx.Invoke(func(lc fx.Lifecycle, l *core.Locker) {
			// The module's own OnStart hook (checking every node) was
			// appended when the Locker was built, so it runs before this one.
			lc.Append(fx.StartHook(func(ctx context.Context) error { return job(ctx, out, l) }))
		}),
		fx.Populate(&locker), // during fx.New, as every fx.Invoke
	)
	return app, locker
}

// startAndStop starts the app, which runs its OnStart hooks, then stops
// it, each bounded by a timeout.
func startAndStop(ctx context.Context, out io.Writer, app *fx.App) error {
	fmt.Fprintln(out, "\napp.Start: the module checks every node, then the app's OnStart hook runs a job under a lock:")
	startCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := app.Start(startCtx); err != nil {
		return fmt.Errorf("starting the app: %w", err)
	}

	fmt.Fprintln(out, "\napp.Stop:")
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := app.Stop(stopCtx); err != nil {
		return fmt.Errorf("stopping the app: %w", err)
	}
	fmt.Fprintln(out, "  the module's OnStop hook closed the Locker (releasing any lock still held) and its clients")
	return nil
}

// checkClosed checks that the app's stop closed its Locker: TryAcquire
// answers core.ErrClosed.
func checkClosed(ctx context.Context, out io.Writer, locker *core.Locker) error {
	fmt.Fprintln(out, "\nTryAcquire after app.Stop:")
	_, err := locker.TryAcquire(ctx, key)
	if !errors.Is(err, core.ErrClosed) {
		return fmt.Errorf("after app.Stop, the Locker should be closed; TryAcquire gave %v", err)
	}
	fmt.Fprintln(out, "  refused: errors.Is(err, core.ErrClosed) == true")
	return nil
}

// checkLogged checks that the logging observer logged, in logs, the job's
// acquisition and release.
func checkLogged(logs string) error {
	for _, want := range []string{`msg="quorumlock acquire" key=` + key + " lock=mutex outcome=ok", `msg="quorumlock release" key=` + key + " lock=mutex outcome=ok"} {
		if !strings.Contains(logs, want) {
			return fmt.Errorf("the logging observer should have logged %s; it logged:\n%s", want, logs)
		}
	}
	return nil
}

// job is the app's start-up work: it runs under the lock key, which
// Locker.Do acquires, keeps alive and releases.
func job(ctx context.Context, out io.Writer, locker *core.Locker) error {
	return locker.Do(ctx, key, func(ctx context.Context) error {
		// ctx ends if the lock is lost: the work must stop then.
		_, err := locker.TryAcquire(ctx, key)
		if !errors.Is(err, core.ErrNotAcquired) {
			return fmt.Errorf("while the job holds %q, a second TryAcquire should be refused with core.ErrNotAcquired, got %v", key, err)
		}
		fmt.Fprintf(out, "  job: holding %q (quorum %d of the nodes); a second TryAcquire is refused: core.ErrNotAcquired\n",
			key, locker.Quorum())
		return nil
	})
}

// syncBuffer is a bytes.Buffer safe for the logger and the check.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
