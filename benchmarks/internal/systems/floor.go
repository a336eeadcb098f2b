package systems

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// releaseScript is the compare-and-delete script of the floors.
const releaseScript = `if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end`

// floorNode is one server as a floor sees it: the two commands of the
// protocol through one driver.
type floorNode interface {
	// set sends SET key value NX PX TTL and reports whether the key was set.
	set(ctx context.Context, key, value string) (bool, error)
	// del runs the compare-and-delete script by its SHA and reports
	// whether the key was deleted.
	del(ctx context.Context, key, value string) (bool, error)
}

// openFloor returns the Open of the floor over driver drv: the Redlock
// protocol with nothing around it. Each server's client loads the
// compare-and-delete script once, at Open. An acquisition draws a value of
// 20 random bytes (crypto/rand, base64url, as quorumlock does), sends
// SET key value NX PX 10000 to every node (a direct call for one node, one
// goroutine per node and a sync.WaitGroup for more), and wins when a
// majority set the key. A release runs the script on every node the same
// way. There are no per-call timeouts (unless nodeTimeout is positive), no
// validity computation, no retries and no clean-up beyond releasing a lost
// round: the floor is what a lock over this driver cannot go below.
//
// With a positive nodeTimeout (the degraded modes, NodeTimeout), each call
// to a node runs under a context.WithTimeout of its own, as quorumlock's
// node timeout bounds its calls, so that a hung server costs the floor that
// long per round rather than stopping it; each round still waits for every
// node.
func openFloor(drv string, nodeTimeout time.Duration) func([]string) (Instance, error) {
	return func(addrs []string) (Instance, error) {
		ctx := context.Background()
		nodes, cl, err := perServer[floorNode]{
			goredis: func(c *goredis.Client, addr string) (floorNode, error) {
				sha, err := c.ScriptLoad(ctx, releaseScript).Result()
				if err != nil {
					return nil, fmt.Errorf("SCRIPT LOAD on %s: %w", addr, err)
				}
				return &floorGoredis{c, sha}, nil
			},
			rueidis: func(c rueidis.Client, addr string) (floorNode, error) {
				sha, err := c.Do(ctx, c.B().ScriptLoad().Script(releaseScript).Build()).ToString()
				if err != nil {
					return nil, fmt.Errorf("SCRIPT LOAD on %s: %w", addr, err)
				}
				return &floorRueidis{c, sha}, nil
			},
		}.open(drv, addrs)
		if err != nil {
			return nil, fmt.Errorf("floor: %w", err)
		}
		return &floor{nodes: nodes, quorum: len(nodes)/2 + 1, nodeTimeout: nodeTimeout, clients: cl}, nil
	}
}

type floor struct {
	nodes       []floorNode
	quorum      int
	nodeTimeout time.Duration // 0: none
	clients     closers
}

// errFloorNotAcquired is the floor's answer when fewer than a majority set
// the key; errors of nodes are joined to it.
var errFloorNotAcquired = errors.New("floor: no majority set the key")

// errFloorNotReleased is the floor's answer when fewer than a majority
// deleted the key.
var errFloorNotReleased = errors.New("floor: no majority deleted the key")

// call runs op on node n, bounded by the node timeout if there is one.
func (f *floor) call(ctx context.Context, n floorNode, key, value string, op func(floorNode, context.Context, string, string) (bool, error)) (bool, error) {
	if f.nodeTimeout <= 0 {
		return op(n, ctx, key, value)
	}
	cctx, cancel := context.WithTimeout(ctx, f.nodeTimeout)
	defer cancel()
	return op(n, cctx, key, value)
}

// each runs op on every node (directly for one node, one goroutine per
// node otherwise) and returns how many said yes, with the nodes' errors.
func (f *floor) each(ctx context.Context, key, value string, op func(floorNode, context.Context, string, string) (bool, error)) (int, error) {
	if len(f.nodes) == 1 {
		ok, err := f.call(ctx, f.nodes[0], key, value, op)
		if ok {
			return 1, nil
		}
		return 0, err
	}
	var (
		wg   sync.WaitGroup
		yes  atomic.Int32
		mu   sync.Mutex
		errs error
	)
	for _, n := range f.nodes {
		wg.Go(func() {
			ok, err := f.call(ctx, n, key, value, op)
			switch {
			case ok:
				yes.Add(1)
			case err != nil:
				mu.Lock()
				errs = errors.Join(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return int(yes.Load()), errs
}

func (f *floor) Acquire(ctx context.Context, key string) (Held, error) {
	var b [20]byte
	_, _ = rand.Read(b[:]) // never fails
	value := base64.RawURLEncoding.EncodeToString(b[:])
	if n, err := f.each(ctx, key, value, floorNode.set); n < f.quorum {
		_, _ = f.each(context.WithoutCancel(ctx), key, value, floorNode.del)
		return nil, errors.Join(errFloorNotAcquired, err)
	}
	return &floorLock{f, key, value}, nil
}

// Contender is not used: floors take no part in the contended modes.
func (f *floor) Contender(key string) Acquirer { return &floorContender{f, key} }

func (f *floor) Close() error { return f.clients.close() }

type floorContender struct {
	f   *floor
	key string
}

func (c *floorContender) Acquire(ctx context.Context) (Held, error) { return c.f.Acquire(ctx, c.key) }

type floorLock struct {
	f          *floor
	key, value string
}

func (l *floorLock) Release(ctx context.Context) error {
	if n, err := l.f.each(ctx, l.key, l.value, floorNode.del); n < l.f.quorum {
		return errors.Join(errFloorNotReleased, err)
	}
	return nil
}

// floorGoredis is a floor node over go-redis.
type floorGoredis struct {
	c   *goredis.Client
	sha string
}

func (n *floorGoredis) set(ctx context.Context, key, value string) (bool, error) {
	cmd := goredis.NewStatusCmd(ctx, "set", key, value, "nx", "px", TTL)
	_ = n.c.Process(ctx, cmd)
	reply, err := cmd.Result()
	if errors.Is(err, goredis.Nil) {
		return false, nil
	}
	return reply == "OK", err
}

func (n *floorGoredis) del(ctx context.Context, key, value string) (bool, error) {
	v, err := n.c.EvalSha(ctx, n.sha, []string{key}, value).Int64()
	return v == 1, err
}

// floorRueidis is a floor node over rueidis.
type floorRueidis struct {
	c   rueidis.Client
	sha string
}

func (n *floorRueidis) set(ctx context.Context, key, value string) (bool, error) {
	reply, err := n.c.Do(ctx, n.c.B().Set().Key(key).Value(value).Nx().PxMilliseconds(TTL).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return false, nil
	}
	return reply == "OK", err
}

func (n *floorRueidis) del(ctx context.Context, key, value string) (bool, error) {
	v, err := n.c.Do(ctx, n.c.B().Evalsha().Sha1(n.sha).Numkeys(1).Key(key).Arg(value).Build()).AsInt64()
	return v == 1, err
}
