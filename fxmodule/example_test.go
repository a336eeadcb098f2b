package fxmodule_test

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/fx"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/fxmodule"
)

// An app whose Locker runs over three independent Redis masters through
// go-redis. It needs the servers, so this example is compiled, not run.
func Example() {
	app := fx.New(
		fxmodule.Module,
		fx.Supply(fxmodule.Config{
			Driver: fxmodule.DriverGoRedis,
			Addrs:  []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"},
			TTL:    10 * time.Second,
			// It starts with one master of three down (TolerateDown's
			// default, N − quorum); RequireAllNodes would refuse to.
		}),
		// Or read it all from QUORUMLOCK_DRIVER, QUORUMLOCK_ADDRS, ...:
		// fxmodule.FromEnv(""),
		fx.Invoke(func(lc fx.Lifecycle, locker *core.Locker) {
			lc.Append(fx.StartHook(func(ctx context.Context) error {
				return locker.Do(ctx, "migrations", func(ctx context.Context) error {
					// Only one instance of the app runs this at a time.
					return nil
				})
			}))
		}),
	)
	app.Run() // starts (checking every master), waits for a signal, stops (releasing held locks)
}

// The same Locker without fx: Build runs the module's start-up check, and
// the caller closes the Locker. It needs the servers, so this example is
// compiled, not run.
func ExampleBuild() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	locker, err := fxmodule.Build(ctx, fxmodule.Config{
		Driver: fxmodule.DriverRedigo,
		Addrs:  []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"},
	})
	if err != nil {
		fmt.Println(err) // an *UnreachableError if two of the three are down
		return
	}
	defer locker.Close()
	err = locker.Do(ctx, "migrations", func(ctx context.Context) error { return nil })
	fmt.Println(err)
}

// printer is a core.Observer that prints each event and counts them.
type printer struct{ n int }

func (p *printer) Observe(_ context.Context, e core.Event) {
	p.n++
	fmt.Println("observed", e.Kind, e.Key, core.Reason(e.Err))
}

// Nodes the app builds itself, here in-process ones, and an Observer
// contributed through the options group.
func ExampleNode() {
	events := new(printer)
	app := fx.New(
		fx.NopLogger,
		fxmodule.Module,
		fx.Supply(fxmodule.Config{KeyPrefix: "app:"}), // no Addrs: the nodes below are used
		fxmodule.Node(func() core.Node { return memory.New(memory.WithName("a")) }),
		fxmodule.Node(func() core.Node { return memory.New(memory.WithName("b")) }),
		fxmodule.Node(func() *memory.Node { return memory.New(memory.WithName("c")) }),
		fxmodule.Options(core.WithObserver(events)),
		fx.Invoke(func(lc fx.Lifecycle, locker *core.Locker) {
			lc.Append(fx.StartHook(func(ctx context.Context) error {
				lock, err := locker.Acquire(ctx, "orders:42")
				if err != nil {
					return err
				}
				fmt.Println("holding", lock.Key(), "with quorum", locker.Quorum())
				return lock.Release(ctx)
			}))
		}),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		fmt.Println("start:", err)
		return
	}
	if err := app.Stop(ctx); err != nil {
		fmt.Println("stop:", err)
	}
	fmt.Println("events:", events.n)
	// Output:
	// observed acquire orders:42 ok
	// holding orders:42 with quorum 2
	// observed release orders:42 ok
	// events: 2
}

// A hook that runs only on the app that leads "scheduler": here one app
// over in-process nodes, which leads at once. In a fleet, the others
// stand by and take over when the leader stops or loses its term.
func ExampleLeaderHook() {
	leading := make(chan struct{})
	app := fx.New(
		fx.NopLogger,
		fxmodule.Module,
		fx.Supply(fxmodule.Config{}),
		fxmodule.Node(func() core.Node { return memory.New(memory.WithName("a")) }),
		fxmodule.Node(func() core.Node { return memory.New(memory.WithName("b")) }),
		fxmodule.Node(func() core.Node { return memory.New(memory.WithName("c")) }),
		fxmodule.LeaderHook("scheduler", func() fx.Hook {
			return fx.Hook{
				OnStart: func(ctx context.Context) error {
					fmt.Println("leading: starting the scheduler")
					close(leading)
					return nil
				},
				OnStop: func(ctx context.Context) error {
					fmt.Println("stepping down: stopping the scheduler")
					return nil
				},
			}
		}),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		fmt.Println("start:", err)
		return
	}
	select { // the campaign runs after the app's start
	case <-leading:
	case <-ctx.Done():
		fmt.Println("not leading:", ctx.Err())
	}
	if err := app.Stop(ctx); err != nil {
		fmt.Println("stop:", err)
	}
	// Output:
	// leading: starting the scheduler
	// stepping down: stopping the scheduler
}
