package redigo

import (
	"crypto/tls"
	"fmt"

	"github.com/gomodule/redigo/redis"

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
	dialOptions []redis.DialOption
	pool        []func(*redis.Pool)
}

// WithCredentials authenticates every connection Dial's pools make: as the
// Redis ACL user username with password, or, with an empty username, with
// password alone (requirepass, the "default" user). Two empty strings mean
// no authentication. Every value is valid (a wrong one fails the nodes'
// calls, not Dial).
// Default: no authentication.
func WithCredentials(username, password string) DialOption {
	return driver.WithCredentials[dialConfig](username, password)
}

// WithTLS, on, makes every connection Dial's pools make use TLS, with a
// clone of the WithTLSConfig configuration for each pool, or, without one,
// TLS 1.2 or later with the server name taken from the host of each
// address. The connection and its handshake are made by a tls.Dialer
// within the caller's context (the node timeout), not by redigo's
// DialUseTLS, whose handshake ignores it. Off, connections use plain TCP.
// Default: off.
func WithTLS(on bool) DialOption { return driver.WithTLS[dialConfig](on) }

// WithTLSConfig sets the TLS configuration of every pool Dial makes (a
// clone for each, with the server name taken from the host of each address
// when cfg names none), and turns TLS on, as WithTLS(true) does. A nil cfg
// changes nothing. Every value is valid.
// Default: none; with WithTLS(true), TLS 1.2 or later with the server name
// taken from the host of each address.
func WithTLSConfig(cfg *tls.Config) DialOption { return driver.WithTLSConfig[dialConfig](cfg) }

// WithDialOptions adds options to redis.DialContext for every connection
// (a database, timeouts, a client name), after those of WithCredentials
// and WithTLS, so that they win over them. A dial option that dials
// another server than the address (redis.DialContextFunc, redis.DialNetDial)
// makes the node something else than the server it is named after. Each
// WithDialOptions adds its options; none adds nothing. Every value is
// valid for Dial (a bad one fails the nodes' calls).
// Default: none.
func WithDialOptions(opts ...redis.DialOption) DialOption {
	return driver.Setting[dialConfig]{Text: "WithDialOptions(...)", Set: func(c *dialConfig) { c.dialOptions = append(c.dialOptions, opts...) }}
}

// WithPool calls fn on each server's pool, once per address, after NewPool
// has made it and before its first use: for MaxActive, Wait, TestOnBorrow.
// fn must keep the pool dialling the address it was made for. Each
// WithPool adds its fn, called in order. A nil fn changes nothing.
// Default: NewPool's settings.
// Dial returns an error matching core.ErrInvalidArgument when fn leaves
// DialContext nil.
func WithPool(fn func(*redis.Pool)) DialOption {
	return driver.AddFunc("WithPool", fn, func(c *dialConfig) *[]func(*redis.Pool) { return &c.pool })
}

// Dial returns one node per address, each an independent Redis master (one
// Redlock node), over a *redis.Pool of its own made by NewPool. Addresses
// are "host:port"; each node is named by its address as given (trimmed).
// redigo has no Redis Cluster client.
//
// Each node owns its pool: closing the node, as core.Locker.Close does,
// closes it (each is a *Node made with WithCloseClient(true)). closeAll
// closes every
// node Dial returned; it is idempotent, so it is safe after Locker.Close,
// and it is for when core.New fails or is never called. A pool connects on first use: Dial neither connects nor
// sends anything, so a server that is down or hung does not hold it up,
// and its node works once the server is back. Defaults: no
// authentication, plain TCP, NewPool's settings.
//
// No addresses, an empty one, one without a port, one given twice, or a
// pool left without DialContext get an error matching
// core.ErrInvalidArgument (a nil DialOption is skipped); on error Dial returns no nodes and has closed
// what it made.
func Dial(addrs []string, opts ...DialOption) (nodes []core.Node, closeAll func() error, err error) {
	c := &dialConfig{}
	if addrs, err = driver.PrepareDial("redigo", addrs, c, opts); err != nil {
		return nil, nil, err
	}
	return c.DialNodes(addrs, func(target []string) (func() (driver.Node, error), error) {
		p, err := c.poolFor(target[0])
		return func() (driver.Node, error) {
			node, err := New(p, WithName(target[0]), WithCloseClient(true))
			return driver.Owned(node, err, p)
		}, err
	})
}

// poolFor returns the pool of the server at addr.
func (c *dialConfig) poolFor(addr string) (*redis.Pool, error) {
	var dial []redis.DialOption
	if c.Username != "" {
		dial = append(dial, redis.DialUsername(c.Username))
	}
	if c.Password != "" {
		dial = append(dial, redis.DialPassword(c.Password))
	}
	if cfg := c.TLSFor(addr); cfg != nil {
		// Not redis.DialUseTLS: redigo's handshake ignores the context
		// (it waits up to DialTLSHandshakeTimeout, 10 s), where
		// tls.Dialer's ends with it, within the node timeout.
		dial = append(dial, redis.DialContextFunc((&tls.Dialer{Config: cfg}).DialContext))
	}
	p := NewPool(addr, append(dial, c.dialOptions...)...)
	driver.CallAll(p, c.pool)
	if p.DialContext == nil {
		_ = p.Close()
		return nil, fmt.Errorf("%w: redigo: Dial: WithPool left Pool.DialContext nil for %s: the pool would dial without the caller's context, "+
			"so a server that accepts no connection would stall every round; keep DialContext", core.ErrInvalidArgument, addr)
	}
	return p, nil
}
