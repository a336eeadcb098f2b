package redigo

import (
	"crypto/tls"
	"fmt"
	"strconv"

	"github.com/gomodule/redigo/redis"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// DialOption configures Dial. Options apply in order, a later one
// overriding an earlier one of the same kind; a nil DialOption is skipped.
// Its String shows the option as written (credentials and functions
// elided).
type DialOption interface {
	applyDial(*dialConfig)
	String() string
}

type dialConfig struct {
	username, password string
	tls                bool
	tlsConfig          *tls.Config
	dialOptions        []redis.DialOption
	pool               []func(*redis.Pool)
}

type dialOption struct {
	fn   func(*dialConfig)
	name string
}

func (o dialOption) applyDial(c *dialConfig) { o.fn(c) }
func (o dialOption) String() string          { return o.name }

// WithCredentials authenticates every connection Dial's pools make: as the
// Redis ACL user username with password, or, with an empty username, with
// password alone (requirepass, the "default" user). Two empty strings mean
// no authentication. Every value is valid (a wrong one fails the nodes'
// calls, not Dial).
// Default: no authentication.
func WithCredentials(username, password string) DialOption {
	return dialOption{func(c *dialConfig) { c.username, c.password = username, password }, "WithCredentials(...)"}
}

// WithTLS, on, makes every connection Dial's pools make use TLS, with a
// clone of the WithTLSConfig configuration for each pool, or, without one,
// TLS 1.2 or later with the server name taken from the host of each
// address. The connection and its handshake are made by a tls.Dialer
// within the caller's context (the node timeout), not by redigo's
// DialUseTLS, whose handshake ignores it. Off, connections use plain TCP.
// Default: off.
func WithTLS(on bool) DialOption {
	return dialOption{func(c *dialConfig) { c.tls = on }, "WithTLS(" + strconv.FormatBool(on) + ")"}
}

// WithTLSConfig sets the TLS configuration of every pool Dial makes (a
// clone for each, with the server name taken from the host of each address
// when cfg names none), and turns TLS on, as WithTLS(true) does. A nil cfg
// changes nothing. Every value is valid.
// Default: none; with WithTLS(true), TLS 1.2 or later with the server name
// taken from the host of each address.
func WithTLSConfig(cfg *tls.Config) DialOption {
	if cfg == nil {
		return dialOption{func(*dialConfig) {}, "WithTLSConfig(nil)"}
	}
	return dialOption{func(c *dialConfig) { c.tls, c.tlsConfig = true, cfg }, "WithTLSConfig(...)"}
}

// WithDialOptions adds options to redis.DialContext for every connection
// (a database, timeouts, a client name), after those of WithCredentials
// and WithTLS, so that they win over them. A dial option that dials
// another server than the address (redis.DialContextFunc, redis.DialNetDial)
// makes the node something else than the server it is named after. Each
// WithDialOptions adds its options; none adds nothing. Every value is
// valid for Dial (a bad one fails the nodes' calls).
// Default: none.
func WithDialOptions(opts ...redis.DialOption) DialOption {
	return dialOption{func(c *dialConfig) { c.dialOptions = append(c.dialOptions, opts...) }, "WithDialOptions(...)"}
}

// WithPool calls fn on each server's pool, once per address, after NewPool
// has made it and before its first use: for MaxActive, Wait, TestOnBorrow.
// fn must keep the pool dialling the address it was made for. Each
// WithPool adds its fn, called in order. A nil fn changes nothing.
// Default: NewPool's settings.
// Dial returns an error matching core.ErrInvalidArgument when fn leaves
// DialContext nil.
func WithPool(fn func(*redis.Pool)) DialOption {
	if fn == nil {
		return dialOption{func(*dialConfig) {}, "WithPool(nil)"}
	}
	return dialOption{func(c *dialConfig) { c.pool = append(c.pool, fn) }, "WithPool(...)"}
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
	addrs, c, err := prepareDial(addrs, opts)
	if err != nil {
		return nil, nil, err
	}
	pools := make([]*redis.Pool, 0, len(addrs))
	fail := func(err error) ([]core.Node, func() error, error) {
		for _, p := range pools {
			_ = p.Close()
		}
		return nil, nil, err
	}
	for _, a := range addrs {
		p, err := c.poolFor(a)
		if err != nil {
			return fail(err)
		}
		pools = append(pools, p)
	}
	for i, p := range pools {
		node, err := New(p, WithName(addrs[i]), WithCloseClient(true))
		if err != nil {
			return fail(err)
		}
		nodes = append(nodes, node)
	}
	return nodes, driver.CloseAll(nodes), nil
}

// prepareDial checks Dial's arguments and returns the trimmed addresses
// and the configuration the options give.
func prepareDial(addrs []string, opts []DialOption) ([]string, *dialConfig, error) {
	addrs, err := driver.CheckAddrs("redigo", addrs)
	if err != nil {
		return nil, nil, err
	}
	var c dialConfig
	for _, o := range opts {
		if o != nil {
			o.applyDial(&c)
		}
	}
	return addrs, &c, nil
}

// poolFor returns the pool of the server at addr.
func (c *dialConfig) poolFor(addr string) (*redis.Pool, error) {
	var dial []redis.DialOption
	if c.username != "" {
		dial = append(dial, redis.DialUsername(c.username))
	}
	if c.password != "" {
		dial = append(dial, redis.DialPassword(c.password))
	}
	if cfg := driver.TLSFor(c.tlsConfig, c.tls, addr); cfg != nil {
		// Not redis.DialUseTLS: redigo's handshake ignores the context
		// (it waits up to DialTLSHandshakeTimeout, 10 s), where
		// tls.Dialer's ends with it, within the node timeout.
		dial = append(dial, redis.DialContextFunc((&tls.Dialer{Config: cfg}).DialContext))
	}
	p := NewPool(addr, append(dial, c.dialOptions...)...)
	for _, fn := range c.pool {
		fn(p)
	}
	if p.DialContext == nil {
		_ = p.Close()
		return nil, fmt.Errorf("%w: redigo: Dial: WithPool left Pool.DialContext nil for %s: the pool would dial without the caller's context, "+
			"so a server that accepts no connection would stall every round; keep DialContext", core.ErrInvalidArgument, addr)
	}
	return p, nil
}
