// Package fxmodule wires quorumlock into go.uber.org/fx applications: Module
// provides a *core.Locker built from a Config, checks its nodes when the
// app starts and closes it when the app stops.
//
//	app := fx.New(
//		fxmodule.Module,
//		fx.Supply(fxmodule.Config{
//			Driver: "goredis",
//			Addrs:  []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"},
//			TTL:    10 * time.Second,
//		}),
//		// or: fxmodule.FromEnv(""), which reads QUORUMLOCK_ADDRS and the rest
//		fx.Invoke(func(locker *core.Locker) { ... }),
//	)
//
// fxmodule imports no Redis client: each driver is a package that
// registers itself when imported (fxmodule/goredis, fxmodule/redigo,
// fxmodule/rueidis, fxmodule/valkey), so that a program links, and
// downloads the code of, only the drivers it imports. A Config whose
// driver's package is not imported fails at start, naming the package.
//
// The package is named after its folder, fxmodule, not quorumlockfx as fx's
// module guide would name it: the project's layout fixes the folder name,
// and the package name follows it.
//
// # Configuration
//
// Config names the driver (goredis, redigo, rueidis or valkey; rueidis by
// default), the servers (Addrs: one independent Redis master each, or,
// with Cluster, the seeds of one Redis Cluster, which is one Redlock
// node), the strategy, credentials, TLS and the core options. Zero fields
// mean the defaults that each field's comment names, core's defaults for
// core options. Each setting has one name: the field's, in upper snake
// case for the environment (QUORUMLOCK_NODE_TIMEOUT) and in lower snake
// case for the yaml and json tags (node_timeout). ConfigFromEnv reads a
// Config from the environment, and FromEnv provides it to the graph;
// otherwise the app supplies the Config with fx.Supply or fx.Provide,
// decoded from a file if it likes.
//
// # Extending the module
//
// Two value groups let the app add to what Config describes:
//
//   - NodesGroup ("quorumlock.nodes", core.Node): nodes the app built
//     itself, over clients it already has. When the group holds any, the
//     Locker uses exactly those and builds no client. Node contributes the
//     result of any constructor; the Node functions of fxmodule/goredis
//     and fxmodule/rueidis build one over the redis.UniversalClient or
//     rueidis.Client in the graph.
//   - OptionsGroup ("quorumlock.options", core.Option): options applied
//     after Config's, such as core.WithObserver for logging or metrics.
//     Option and Options contribute them. fx value groups are unordered,
//     so two contributed options that set the same thing conflict.
//
// An optional core.Observer in the graph is installed too, and an optional
// *slog.Logger receives the warnings about nodes tolerated down at start.
//
// fx.Decorate works on the Module's inputs and output. A decorator of
// Config given to fx.New (decorators at the top level apply inside modules
// too) changes the Locker that Module builds:
//
//	fx.Decorate(func(c fxmodule.Config) fxmodule.Config { c.KeyPrefix = "billing:"; return c })
//
// A decorator of *core.Locker sees the Locker before the app's
// constructors do. A Locker has no wrapper type, so such a decorator
// either returns its argument or replaces it with a Locker of its own,
// which it must then close itself; Module keeps closing the one it built.
//
// # Errors
//
// A Config that cannot work (an unknown driver or strategy, a negative
// value, no addresses, a QUORUMLOCK_ variable that does not parse, or
// values core.New refuses) fails the app's construction with an error
// that matches core.ErrInvalidArgument and names every faulty field.
//
// # Lifecycle and ownership
//
// On start, every node is sent one EVALSHA of the script "return 1", in
// parallel and bounded by Config.PingTimeout (2 s by default): NOSCRIPT,
// or 1 from a server that has the script, shows that the node answers
// and runs scripts, and nothing runs or is written. Start-up fails with an
// *UnreachableError naming each node that did not answer, with its
// address and error, unless a quorum answered and at most
// Config.TolerateDown did not: by default N − quorum, the minority that
// Redlock tolerates (RequireAllNodes requires every node). On stop, the Locker is closed: it releases the locks still
// held, and closes its nodes.
//
// The clients the module builds from Config are its own: no one else can
// reach them, and closing the Locker closes them. Nodes the app
// contributes are closed with the Locker too (core.New takes ownership of
// its nodes), but the goredis, redigo and rueidis nodes close the client
// they were built around only when made with WithCloseClient(true): the app's
// clients stay open, for the app to close.
//
// # Leader-only hooks
//
// LeaderHook(key, constructor) runs the fx.Hook that constructor returns
// only while this app leads key (core.Locker.Campaign): after the app's
// start it campaigns in the background; OnStart runs when it leads, OnStop
// when the term is lost or at risk (within the term's validity) or the app
// stops; it stands again after a lost term, and resigns at stop. A failing
// OnStart shuts the app down. docs/fx.md has the details.
//
// # Without fx
//
// Build(ctx, c, opts...) returns the Locker the module would provide,
// after the same start-up check; the caller closes it, which closes the
// clients Build made. New, the module's constructor, also works without
// fx, but runs no check without a Lifecycle.
//
// # Adoption
//
// There is no setting that adopts the servers for the restart guard: left
// on, it would adopt them at every start, and so turn the guard off for a
// server that restarted empty after a crash. Servers up longer than the
// guard's max TTL vote on first use anyway; for a fresh deployment that
// must not wait a TTL, adopt once with core.Locker.Adopt or redis-cli SET
// quorumlock:birth 0.
//
// # Drivers
//
// The module builds each client with the settings its backend recommends
// (goredis.ClientOptions and ClusterOptions, redigo.NewPool, rueidis's
// and valkey's ClientOption, see the backends' docs), with Username,
// Password and TLS added, through each backend's Dial. The rueidis and
// valkey-go clients of independent masters are single-server clients
// (ForceSingleClient), so that a server down at start does not fail the
// client's construction and TolerateDown can apply; goredis and redigo
// connect on first use anyway. rueidis and valkey-go clients connect when
// built, and Dial waits for them one node timeout at most: a hung server
// costs the start-up check its PingTimeout, not more. A Redis Cluster
// that cannot be reached fails the app's construction or its start-up
// check.
package fxmodule
