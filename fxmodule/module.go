package fxmodule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/fx"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// The value groups the module reads.
const (
	// NodesGroup is the value group of core.Node values the app
	// contributes (see Node, GoRedisNode, RueidisNode). When it holds any,
	// the Locker is built over exactly those nodes, and Config's Driver,
	// Addrs, Cluster, Username, Password and TLS fields are not used
	// (they are still validated).
	NodesGroup = "quorumlock.nodes"
	// OptionsGroup is the value group of core.Option values the app
	// contributes (see Option, Options): observers, a clock, anything
	// Config has no field for.
	OptionsGroup = "quorumlock.options"
)

// Module provides a *core.Locker built by New from the Config in the
// graph, and ties it to the app's lifecycle: on start every node is
// checked, on stop the Locker is closed. The app supplies the Config
// (fx.Supply, fx.Provide, or FromEnv).
var Module = fx.Module("quorumlock", fx.Provide(New))

// Params are New's inputs; fx fills them from the graph.
type Params struct {
	fx.In

	// Config describes the Locker.
	Config Config

	// Nodes, when not empty, are the Locker's nodes instead of those
	// Config describes (group NodesGroup). The Locker closes them when it
	// is closed (core.New takes ownership of its nodes); the backends'
	// nodes do not close the client they were built around.
	Nodes []core.Node `group:"quorumlock.nodes"`

	// Options are added after those Config gives, so they win over them
	// (group OptionsGroup). fx value groups have no order: two options of
	// the group that set the same thing conflict.
	Options []core.Option `group:"quorumlock.options"`

	// Observer, when given, is added with core.WithObserver after
	// Options.
	Observer core.Observer `optional:"true"`

	// Logger reports the nodes found unreachable at start but tolerated
	// (Config.TolerateDown). Default: slog.Default().
	Logger *slog.Logger `optional:"true"`

	// Lifecycle receives the start-up check and the Locker's Close. Without
	// it (New called outside fx), there is no check and the caller closes
	// the Locker.
	Lifecycle fx.Lifecycle `optional:"true"`
}

// Result is New's output.
type Result struct {
	fx.Out

	// Locker is the Locker over the configured nodes.
	Locker *core.Locker
}

// New builds the Locker that Module provides; it is exported so that the
// same wiring works without fx. It validates p.Config, builds one client
// and node per address with the configured driver (or takes p.Nodes), and
// calls core.New with the options of p.Config, then p.Options, then
// p.Observer.
//
// The clients New makes belong to the Locker: its Close, run by the
// Lifecycle's OnStop, releases the locks still held and closes them.
// Clients behind nodes of p.Nodes are the app's and stay open.
//
// With p.Lifecycle, New appends a hook whose OnStart checks every node
// with one EVALSHA of the script "return 1" (a NOSCRIPT reply counts as an
// answer), in parallel and bounded by Config.PingTimeout, and fails with
// an *UnreachableError naming each node that did not answer, unless a
// quorum answered and at most Config.TolerateDown (N − quorum by default)
// did not; the Locker is closed then. Its OnStop shuts the Locker down
// (core.Locker.Shutdown) within the stop context: holders still at work
// (Do functions, httplock handlers) are cancelled and waited for until
// that context ends, and their locks are never released under them.
// Without p.Lifecycle, there is no check: Build runs it.
func New(p Params) (Result, error) {
	locker, nodes, err := build(p)
	if err != nil {
		return Result{}, err
	}
	if p.Lifecycle != nil {
		log := p.Logger
		if log == nil {
			log = slog.Default()
		}
		c := p.Config
		p.Lifecycle.Append(fx.Hook{
			OnStart: func(ctx context.Context) error {
				if err := c.check(ctx, nodes, locker, log); err != nil {
					// OnStop runs only for hooks that started.
					return errors.Join(err, locker.Close())
				}
				return nil
			},
			// Holders still at work get until the stop context ends.
			OnStop: func(ctx context.Context) error { return locker.Shutdown(ctx) },
		})
	}
	return Result{Locker: locker}, nil
}

// build makes the Locker of p, and returns it with its nodes.
func build(p Params) (*core.Locker, []core.Node, error) {
	c := p.Config
	if err := c.validate(fieldName); err != nil {
		return nil, nil, fmt.Errorf("fxmodule: %w", err)
	}
	nodes := p.Nodes
	if len(nodes) == 0 {
		var err error
		if nodes, err = buildNodes(&c); err != nil {
			return nil, nil, err
		}
	}
	opts := append(c.coreOptions(), p.Options...)
	if p.Observer != nil {
		opts = append(opts, core.WithObserver(p.Observer))
	}
	locker, err := core.New(nodes, opts...)
	if err != nil {
		if len(p.Nodes) == 0 {
			for _, n := range nodes {
				_ = n.Close()
			}
		}
		return nil, nil, fmt.Errorf("fxmodule: %w", err)
	}
	return locker, slices.Clone(nodes), nil
}

// Build returns the Locker that Module would provide for c, without fx:
// it validates c, builds a node per address with the configured driver
// (whose package, such as fxmodule/goredis, the program imports), calls core.New with the options of c and then opts, and runs the same
// start-up check as the module's OnStart hook, within ctx and
// Config.PingTimeout (see New). The caller owns the Locker and closes it;
// on error, Build closes everything it made.
func Build(ctx context.Context, c Config, opts ...core.Option) (*core.Locker, error) {
	if ctx == nil {
		return nil, invalidConfig(errors.New("fxmodule: Build: context is nil"))
	}
	locker, nodes, err := build(Params{Config: c, Options: opts})
	if err != nil {
		return nil, err
	}
	if err := c.check(ctx, nodes, locker, slog.Default()); err != nil {
		return nil, errors.Join(err, locker.Close())
	}
	return locker, nil
}

// check is the start-up check of the nodes of locker: every node is
// pinged, and at most Config.TolerateDown of them (N − quorum by default)
// may fail, with a quorum answering.
func (c *Config) check(ctx context.Context, nodes []core.Node, locker *core.Locker, log *slog.Logger) error {
	return checkNodes(ctx, nodes, c.pingTimeout(), c.tolerateDown(len(nodes), locker.Quorum()), locker.Quorum(), log)
}

// UnreachableError is the start-up failure of Module when more nodes than
// Config.TolerateDown, or more than leave a quorum, did not answer.
// It matches core.ErrUnavailable and the nodes' errors with errors.Is.
type UnreachableError struct {
	// Down lists the nodes that did not answer, in the Locker's order.
	Down []NodeError
	// Nodes is how many nodes the Locker has, Quorum how many it needs,
	// TolerateDown how many may be down at start.
	Nodes, Quorum, TolerateDown int
}

// NodeError is one node's failure in the start-up check.
type NodeError struct {
	Node string // the node's name (core.Node.String), its address for the module's nodes
	Err  error
}

// Error names every node that did not answer, with its error.
func (e *UnreachableError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fxmodule: %d of %d quorumlock nodes unreachable at start (tolerated: %d, quorum: %d):", len(e.Down), e.Nodes, e.TolerateDown, e.Quorum)
	for i, d := range e.Down {
		if i > 0 {
			b.WriteByte(';')
		}
		fmt.Fprintf(&b, " node %s: %v", d.Node, d.Err)
	}
	return b.String()
}

// Unwrap returns core.ErrUnavailable and the nodes' errors.
func (e *UnreachableError) Unwrap() []error {
	errs := []error{core.ErrUnavailable}
	for _, d := range e.Down {
		errs = append(errs, d.Err)
	}
	return errs
}

// pingSHA is the SHA1 of the script "return 1". The start-up check sends
// EVALSHA of it, the cheapest call core.Node has: a server answers with
// NOSCRIPT (or with 1, if it has the script cached), and either answer
// shows that the node is reachable and that scripting, which the lock
// protocol needs, works. It runs nothing, and it suits any correct Node,
// in-process ones included (they must classify NOSCRIPT).
const pingSHA = "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"

// ping asks n to run pingSHA.
func ping(ctx context.Context, n core.Node) error {
	reply, err := n.EvalSHA(ctx, pingSHA, nil, nil)
	switch {
	case err != nil && n.Classify(err) == driver.KindNoScript:
		return nil
	case err != nil:
		return err
	case reply != int64(1):
		return fmt.Errorf("unexpected reply %v (%T) to EVALSHA of \"return 1\"", reply, reply)
	}
	return nil
}

// checkNodes pings every node at once, within timeout. A node still
// silent when timeout ends has its error say so: drivers report a
// deadline only as "context deadline exceeded" or "i/o timeout".
func checkNodes(ctx context.Context, nodes []core.Node, timeout time.Duration, tolerate, quorum int, log *slog.Logger) error {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	deadline, _ := pctx.Deadline()
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			err := ping(pctx, n)
			// go-redis's socket deadline, the context's, can fire first.
			if err != nil && ctx.Err() == nil && (pctx.Err() != nil || !time.Now().Before(deadline)) {
				err = fmt.Errorf("no answer within PingTimeout (%v): %w", timeout, err)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	e := &UnreachableError{Nodes: len(nodes), Quorum: quorum, TolerateDown: tolerate}
	for i, err := range errs {
		if err != nil {
			e.Down = append(e.Down, NodeError{Node: nodes[i].String(), Err: err})
		}
	}
	if len(e.Down) == 0 {
		return nil
	}
	if len(e.Down) > tolerate || len(nodes)-len(e.Down) < quorum {
		return e
	}
	for _, d := range e.Down {
		log.WarnContext(ctx, "quorumlock: node unreachable at start, tolerated", "node", d.Node, "err", d.Err,
			"down", len(e.Down), "tolerate_down", tolerate)
	}
	return nil
}

// FromEnv provides the Config read by ConfigFromEnv(prefix); start-up
// fails with its error when a variable is bad.
func FromEnv(prefix string) fx.Option {
	return fx.Provide(func() (Config, error) { return ConfigFromEnv(prefix) })
}

// Node contributes the node made by constructor to NodesGroup.
// constructor is an fx constructor, with any parameters from the graph,
// whose first result implements core.Node (an error may follow):
//
//	fxmodule.Node(func(rdb *redis.Client) (*goredis.Node, error) { return goredis.New(rdb) })
//
// Give one Node per independent server. The Locker closes the node, which
// for the backends' nodes leaves the client open.
func Node(constructor any) fx.Option {
	return fx.Provide(fx.Annotate(constructor, fx.As(new(core.Node)), fx.ResultTags(`group:"`+NodesGroup+`"`)))
}

// Option contributes the core.Option made by constructor, an fx
// constructor with any parameters from the graph, to OptionsGroup:
//
//	fxmodule.Option(func(log *slog.Logger) core.Option { return core.WithObserver(myObserver(log)) })
func Option(constructor any) fx.Option {
	return fx.Provide(fx.Annotate(constructor, fx.As(new(core.Option)), fx.ResultTags(`group:"`+OptionsGroup+`"`)))
}

// Options contributes opts to OptionsGroup.
func Options(opts ...core.Option) fx.Option {
	provides := make([]fx.Option, len(opts))
	for i, o := range opts {
		provides[i] = fx.Provide(fx.Annotate(func() core.Option { return o }, fx.ResultTags(`group:"`+OptionsGroup+`"`)))
	}
	return fx.Options(provides...)
}
