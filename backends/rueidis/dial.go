package rueidis

import (
	"crypto/tls"
	"fmt"
	"slices"
	"time"

	"github.com/redis/rueidis"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// DialOption configures Dial. Options apply in order, a later one
// overriding an earlier one of the same kind; a nil DialOption is skipped.
// Its String shows the option as written (credentials and functions
// elided). It has Option's shape (driver.Option) but not its type: a
// DialOption says how Dial makes clients, which means nothing to New, given
// a client already made; Dial names its nodes by address and owns their
// clients, which New's Options set. Two types let the compiler refuse an
// option given to the wrong function.
type DialOption interface{ driver.Option[dialConfig] }

type dialConfig struct {
	driver.DialConfig
	clientOptions []func(*rueidis.ClientOption)
}

// WithCredentials authenticates every client Dial makes: as the Redis ACL
// user username with password, or, with an empty username, with password
// alone (requirepass, the "default" user). Two empty strings mean no
// authentication. Every value is valid for the options (rueidis.NewClient
// fails a wrong one, as Dial describes).
// Default: no authentication.
func WithCredentials(username, password string) DialOption {
	return driver.WithCredentials[dialConfig](username, password)
}

// WithTLS, on, makes every client Dial makes connect with TLS, using a
// clone of the WithTLSConfig configuration for each client, or, without
// one, TLS 1.2 or later with the server name taken from the host of each
// address (of the first seed for a cluster). Off, clients use plain TCP.
// Default: off.
func WithTLS(on bool) DialOption { return driver.WithTLS[dialConfig](on) }

// WithTLSConfig sets the TLS configuration of every client Dial makes (a
// clone for each, with the server name taken from the host of each address
// when cfg names none), and turns TLS on, as WithTLS(true) does. A nil cfg
// changes nothing. Every value is valid.
// Default: none; with WithTLS(true), TLS 1.2 or later with the server name
// taken from the host of each address.
func WithTLSConfig(cfg *tls.Config) DialOption { return driver.WithTLSConfig[dialConfig](cfg) }

// WithCluster, on, makes the addresses the seeds of ONE Redis Cluster (any
// of its masters), which Dial makes one node of, over a cluster client: a
// cluster's masters are not independent voters. Off, every address is an
// independent master and a node of its own.
// Default: off.
// With it, Dial returns an error matching core.ErrInvalidArgument when the
// servers are not a cluster.
func WithCluster(on bool) DialOption { return driver.WithCluster[dialConfig](on) }

// WithClientOption calls fn on the options of each client, once per
// address (once for a cluster), after Dial has set them from ClientOption,
// WithCredentials and WithTLS, and before rueidis.NewClient: for timeouts
// (Dialer.Timeout, the dial timeout, stays rueidis's to set), a client
// name, a database, a DialCtxFn. Each WithClientOption adds its fn,
// called in order. A nil fn changes nothing.
// Default: ClientOption's settings.
// Dial returns an error matching core.ErrInvalidArgument when fn changes
// InitAddress, ForceSingleClient, AlwaysPipelining, DisableAutoPipelining
// or PipelineMultiplex from what Dial set, or sets Sentinel, replica or
// redirect options.
func WithClientOption(fn func(*rueidis.ClientOption)) DialOption {
	return driver.AddFunc("WithClientOption", fn, func(c *dialConfig) *[]func(*rueidis.ClientOption) { return &c.clientOptions })
}

// WithConnectWait bounds how long Dial waits for its clients to connect:
// rueidis.NewClient connects before it returns, for up to its dial timeout
// when a server is hung. Dial makes the clients in parallel; a client not
// made when d has passed gets a node that waits for it (see Dial); with 0,
// Dial does not wait.
// Default: core.DefaultNodeTimeout (50 ms).
// A negative d makes Dial return an error matching
// core.ErrInvalidArgument.
func WithConnectWait(d time.Duration) DialOption { return driver.WithConnectWait[dialConfig](d) }

// Dial returns one node per address, each an independent Redis master (one
// Redlock node), over a rueidis client of its own made from ClientOption
// with ForceSingleClient; with WithCluster(true), one node over a cluster
// client of the cluster the addresses are seeds of. Addresses are "host:port";
// each node is named by its address as given (trimmed), a cluster
// "cluster:" and its sorted seeds. Defaults: no authentication, plain TCP,
// ClientOption's settings, a connect wait of core.DefaultNodeTimeout.
//
// rueidis connects when a client is made. Dial makes the clients in
// parallel and waits for them at most the connect wait (WithConnectWait).
// A server that refuses connections does not hold it up: its client comes
// back at once and connects again when used. A client still connecting
// when the wait ends (a hung server) gets a node at once, whose calls wait
// for the client within their own context (for core, a node timeout, as
// for any hung server) and then go through it; that node is a
// *driver.Late, not a *Node, with the same core capabilities. Should that
// NewClient fail (a cluster none of whose seeds answered), its node fails
// every call with rueidis's error. Dial sends no command beyond rueidis's
// connection handshake.
//
// Each node owns its client: closing the node, as core.Locker.Close does,
// closes it; a node still connecting cuts the connection attempt short
// and closes the client once NewClient has returned. closeAll closes every
// node Dial returned; it is idempotent, so it is safe after Locker.Close,
// and it is for when core.New fails or is never called.
//
// No addresses, an empty one, one without a port, one given twice, or
// options that break what a lock node needs get an error matching
// core.ErrInvalidArgument (a nil DialOption is skipped); so does
// WithCluster(true) over servers that are not a cluster, and a cluster
// none of whose seeds answers within the wait makes Dial fail with
// rueidis's error. On error Dial returns no nodes
// and has closed what it made.
func Dial(addrs []string, opts ...DialOption) (nodes []core.Node, closeAll func() error, err error) {
	c := &dialConfig{DialConfig: driver.DialConfig{Wait: core.DefaultNodeTimeout}}
	if addrs, err = driver.PrepareDial("rueidis", addrs, c, opts); err != nil {
		return nil, nil, err
	}
	return c.DialLates(addrs, func(target []string) (func(*driver.Late) (driver.Node, error), error) {
		o, err := c.clientOptionFor(target)
		return newClient(o, c.Cluster), err
	})
}

// newClient returns the build of a driver.Late: it makes the client of
// options o, connecting through the Late's Dial, and the node over it.
func newClient(o rueidis.ClientOption, cluster bool) func(*driver.Late) (driver.Node, error) {
	return func(l *driver.Late) (driver.Node, error) {
		o.DialCtxFn = l.DialFunc(o.DialCtxFn, o.DialFn) // rueidis's order: DialCtxFn, then DialFn
		client, err := rueidis.NewClient(o)
		if client == nil {
			return nil, fmt.Errorf("rueidis: Dial: client of %s: %w", l, err)
		}
		// With ForceSingleClient, err is the first dial's failure, and the
		// client dials again when used.
		node, err := New(client, WithName(l.String()), WithCloseClient(true))
		if err == nil && cluster && !node.common.Cluster {
			err = fmt.Errorf("%w: rueidis: Dial: WithCluster(true), but %s is not a Redis Cluster (rueidis made a client in mode %s): Dial its servers without WithCluster(true)",
				core.ErrInvalidArgument, l, client.Mode())
		}
		return driver.Owned(node, err, client)
	}
}

// clientOptionFor returns the options of the client over addrs (one
// server's address, or a cluster's seeds).
func (c *dialConfig) clientOptionFor(addrs []string) (rueidis.ClientOption, error) {
	o := ClientOption(slices.Clone(addrs)...)
	o.Username, o.Password, o.TLSConfig = c.Username, c.Password, c.TLSFor(addrs[0])
	o.ForceSingleClient = !c.Cluster
	driver.CallAll(&o, c.clientOptions)
	if fault := optionFault(&o, addrs, c.Cluster); fault != "" {
		return rueidis.ClientOption{}, fmt.Errorf("%w: rueidis: Dial: WithClientOption %s", core.ErrInvalidArgument, fault)
	}
	return o, nil
}

// dialAdvice is what to give Dial instead of options that make a client
// that is not one Redlock node.
const dialAdvice = "give Dial the address of each independent master (not its replicas), or the seeds of one Redis Cluster with WithCluster(true)"

// optionFault says what in o, as the user's WithClientOption left it,
// a node made by Dial cannot have, or "".
func optionFault(o *rueidis.ClientOption, addrs []string, cluster bool) string {
	switch {
	case !slices.Equal(o.InitAddress, addrs):
		return fmt.Sprintf("changed ClientOption.InitAddress from %q to %q: the node would be named for servers it does not reach; give Dial the addresses",
			addrs, o.InitAddress)
	case cluster && o.ForceSingleClient:
		return "set ClientOption.ForceSingleClient, which makes a client of the first seed alone; leave it off with WithCluster(true)"
	case !cluster && !o.ForceSingleClient:
		return fmt.Sprintf("turned ClientOption.ForceSingleClient off for %s: without it a server that is down fails Dial, "+
			"and one that answers CLUSTER SLOTS becomes a cluster client; use WithCluster(true) for a cluster", addrs[0])
	case !o.AlwaysPipelining || o.DisableAutoPipelining:
		return "turned ClientOption.AlwaysPipelining off (or DisableAutoPipelining on): a lone call would then ignore its context's cancellation, " +
			"and the node timeout could not bound it"
	case o.PipelineMultiplex >= 0:
		return fmt.Sprintf("set ClientOption.PipelineMultiplex to %d: with more than one connection per server, the clean-up release "+
			"of a failed acquisition can overtake the SET it undoes and leave the key until its TTL; leave it -1", o.PipelineMultiplex)
	case o.Sentinel.MasterSet != "":
		return "set ClientOption.Sentinel: a Sentinel client moves to a promoted replica, which may lack a lock the master acknowledged; " + dialAdvice
	case len(o.Standalone.ReplicaAddress) > 0 || o.Standalone.EnableRedirect:
		return "set ClientOption.Standalone (replicas or redirects): the client would send commands to other servers than its primary; " + dialAdvice
	}
	return ""
}
