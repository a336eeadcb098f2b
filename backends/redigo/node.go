package redigo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
	"weak"

	"github.com/gomodule/redigo/redis"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// Pool is the part of a redigo pool that a Node uses: *redis.Pool
// implements it. Connections it returns must implement
// redis.ConnWithContext (those of *redis.Pool do), so that a context bounds
// every command.
type Pool interface {
	GetContext(ctx context.Context) (redis.Conn, error)
}

// Node is a quorumlock node over a redigo pool: one independent Redis
// master. It borrows a connection for each operation and returns it at
// once; a connection that failed is discarded by the pool, never reused.
// It closes the pool only when made with WithCloseClient(true).
type Node struct {
	pool   Pool
	common driver.Common
}

var _ driver.Pipelined = (*Node)(nil)

// Option configures a Node. Options apply in order, a later one
// overriding an earlier one of the same kind; a nil Option is skipped. Its
// String shows the option as written. Dial takes DialOptions instead.
type Option interface{ driver.Option[config] }

type config struct {
	driver.NodeConfig
	allowUnbounded bool
}

// WithName names the node in errors, logs and metrics, and orders it
// among the Locker's nodes (every process must name a server alike); ""
// keeps the default. core.New refuses two nodes of one name in a Locker.
// Default: the address given to NewPool; New refuses an unnamed pool that
// NewPool did not make, with an error matching core.ErrInvalidArgument,
// since it cannot tell which server the pool dials.
func WithName(name string) Option { return driver.WithName[config](name) }

// WithCloseClient, on, makes Node.Close close the pool (once): for a node
// that is the pool's only user, as Dial's are. Off, the pool belongs to the
// caller, who closes it.
// Default: off.
func WithCloseClient(on bool) Option { return driver.WithCloseClient[config](on) }

// WithUnboundedDial, on, accepts a *redis.Pool that has Dial but no
// DialContext. Such a pool dials without the caller's context, so a server
// that accepts no connection stalls a round for the dial's own timeout (by
// default the operating system's, often minutes) instead of the Locker's
// node timeout.
// Default: off; New refuses such a pool with an error matching
// core.ErrInvalidArgument.
func WithUnboundedDial(on bool) Option {
	return driver.Setting[config]{Text: "WithUnboundedDial(" + strconv.FormatBool(on) + ")", Set: func(c *config) { c.allowUnbounded = on }}
}

// NewPool returns a pool suited to a lock node at addr: it dials with the
// caller's context (DialContext), so the node timeout bounds connecting
// too; it keeps up to 64 idle connections (a Locker with keep-alive or many
// goroutines reuses them rather than dialling) and closes those idle for
// more than four minutes. Extra dial options (password, TLS, database)
// are passed to redis.DialContext. Set the remaining fields (MaxActive,
// Wait) on the result before use; the caller closes the pool.
func NewPool(addr string, opts ...redis.DialOption) *redis.Pool {
	p := &redis.Pool{
		MaxIdle:     64,
		IdleTimeout: 4 * time.Minute,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redis.DialContext(ctx, "tcp", addr, opts...)
		},
	}
	remember(p, addr)
	return p
}

// New returns a Node that runs the lock protocol through pool, named as
// WithName says. A *redis.Pool must have DialContext set (see NewPool and
// WithUnboundedDial). Errors match core.ErrInvalidArgument. New skips a
// nil Option.
func New(pool Pool, opts ...Option) (*Node, error) {
	if driver.IsNil(pool) {
		return nil, fmt.Errorf("%w: redigo: pool is nil", core.ErrInvalidArgument)
	}
	c := driver.Configure(&config{}, opts)
	p, _ := pool.(*redis.Pool)
	name := cmp.Or(c.Name, addrOf(p))
	if p != nil {
		label := cmp.Or(name, "(unnamed)")
		switch {
		case p.Dial == nil && p.DialContext == nil:
			return nil, fmt.Errorf("%w: redigo: pool %s has neither Dial nor DialContext", core.ErrInvalidArgument, label)
		case p.DialContext == nil && !c.allowUnbounded:
			return nil, fmt.Errorf("%w: redigo: pool %s dials with Dial, which ignores contexts, so a server that accepts no connection "+
				"would stall every round; set DialContext (redigo.NewPool does), or pass redigo.WithUnboundedDial(true)",
				core.ErrInvalidArgument, label)
		}
	}
	if name == "" {
		return nil, fmt.Errorf("%w: redigo: the pool does not say which server it reaches (it was not made by NewPool): "+
			"name the node after it with WithName(\"host:port\"), the same in every process", core.ErrInvalidArgument)
	}
	return &Node{pool: pool, common: driver.Common{Pkg: "redigo", Name: name, Owner: driver.NewOwner(c.CloseClient)}}, nil
}

// Pool returns the pool the node was built with.
func (n *Node) Pool() Pool { return n.pool }

// String returns the node's name.
func (n *Node) String() string { return n.common.Name }

// Close does nothing unless the node was made with WithCloseClient(true):
// the pool belongs to the caller, who closes it. With it, the first Close
// closes the pool, and later ones return nil.
func (n *Node) Close() error { return n.common.Close(n.pool) }

// do runs one command on a connection borrowed for it. A cancelled context
// sends nothing. The connection goes back to the pool, which drops it if
// the command broke it (redigo closes a connection whose context ended
// mid-command, so no late reply can be read by the next borrower).
func (n *Node) do(ctx context.Context, cmd string, args ...any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	conn, err := n.pool.GetContext(ctx)
	if err != nil {
		return nil, err
	}
	reply, err := redis.DoContext(conn, ctx, cmd, args...)
	if cerr := conn.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return reply, n.explain(err)
}

// SetNX implements core.Node with SET key value PX ttl NX.
func (n *Node) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	reply, err := n.do(ctx, "SET", key, value, "PX", ttl.Milliseconds(), "NX")
	switch {
	case err != nil:
		return false, err
	case reply == nil:
		return false, nil // NX: the key exists
	case reply == "OK":
		return true, nil
	}
	return false, fmt.Errorf("redigo: unexpected reply %#v to SET NX", reply)
}

// EvalSHA implements core.Node.
func (n *Node) EvalSHA(ctx context.Context, sha string, keys, args []string) (any, error) {
	return convert(n.do(ctx, "EVALSHA", scriptArgs(sha, keys, args)...))
}

// Eval implements core.Node.
func (n *Node) Eval(ctx context.Context, script string, keys, args []string) (any, error) {
	return convert(n.do(ctx, "EVAL", scriptArgs(script, keys, args)...))
}

// Classify implements core.Node: NOSCRIPT replies are driver.KindNoScript,
// context errors driver.KindContext, and anything else a node failure.
func (n *Node) Classify(err error) driver.ErrorKind {
	var re redis.Error
	return driver.Classification(err, errors.As(err, &re) && strings.HasPrefix(string(re), "NOSCRIPT"))
}

func scriptArgs(script string, keys, args []string) []any {
	return append([]any{script, len(keys)}, driver.Anys(keys, args)...)
}

// convert turns redigo's reply types into core.Node's: bulk strings arrive
// as []byte and become strings, arrays are converted element by element.
// redigo returns a server error reply as a redis.Error value, not as the
// error: it becomes the error here.
func convert(reply any, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	switch v := reply.(type) {
	case []byte:
		return string(v), nil
	case redis.Error:
		return nil, v
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			c, err := convert(e, nil)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	}
	return reply, nil
}

// pools maps each pool NewPool made, by weak pointer, to the address it
// dials, so that New can name its node after the server without the
// registry keeping the pool alive.
var pools sync.Map // weak.Pointer[redis.Pool] → string

func remember(p *redis.Pool, addr string) {
	key := weak.Make(p)
	pools.Store(key, addr)
	runtime.AddCleanup(p, func(k weak.Pointer[redis.Pool]) { pools.Delete(k) }, key)
}

// addrOf returns the address of a pool NewPool made, or "".
func addrOf(p *redis.Pool) string {
	if p == nil {
		return ""
	}
	addr, _ := pools.Load(weak.Make(p))
	s, _ := addr.(string)
	return s
}

// clusterAdvice is what a user who gave a Redis Cluster member to a redigo
// pool should build instead.
const clusterAdvice = "redigo has no cluster client; build one node over the whole cluster with backends/goredis or backends/rueidis"

// explain turns a Redis Cluster reply (MOVED, ASK, CROSSSLOT) into an
// error that says what is wrong: the pool's server is a cluster member,
// given where an independent master was expected (see
// driver.ExplainCluster). A redigo pool always talks to one server.
func (n *Node) explain(err error) error { return driver.ExplainCluster(err, clusterAdvice) }
