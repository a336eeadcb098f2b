package safety

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/conformance/redistest"
)

// EnvLibfaketime names the environment variable that gives the path of
// libfaketime.so.1; without it, Debian's and the usual install paths are
// tried.
const EnvLibfaketime = "QUORUMLOCK_LIBFAKETIME"

// ErrNoFaketime is returned when libfaketime (or glibc's malloc debugging
// library, which a faketime'd redis-server needs too) cannot be found.
var ErrNoFaketime = errors.New("safety: libfaketime not found (install Debian's faketime package: scripts/ensure-faketime.sh, which make test and make chaos run; or set " + EnvLibfaketime + ")")

// Where libfaketime.so.1 and glibc's libc_malloc_debug.so.0 are looked for
// (the first match wins); scripts/ensure-faketime.sh checks the same.
var (
	libfaketimeGlobs = []string{"/usr/lib/*/faketime/libfaketime.so.1", "/usr/lib/faketime/libfaketime.so.1", "/usr/local/lib/faketime/libfaketime.so.1"}
	mallocDebugGlobs = []string{"/lib/*/libc_malloc_debug.so.0", "/usr/lib/*/libc_malloc_debug.so.0", "/lib64/libc_malloc_debug.so.0", "/usr/lib64/libc_malloc_debug.so.0"}
)

func findLib(env string, globs []string) (string, error) {
	if env != "" {
		if p := os.Getenv(env); p != "" {
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("%w: %s=%s: %v", ErrNoFaketime, env, p, err)
			}
			return p, nil
		}
	}
	for _, g := range globs {
		if m, _ := filepath.Glob(g); len(m) > 0 {
			return m[0], nil
		}
	}
	return "", ErrNoFaketime
}

// Libfaketime returns the path of libfaketime.so.1, or ErrNoFaketime.
func Libfaketime() (string, error) { return findLib(EnvLibfaketime, libfaketimeGlobs) }

// FaketimeEnv returns the environment entries that run a process under
// libfaketime with its wall clock (gettimeofday, CLOCK_REALTIME) going rate
// times as fast as the real one from the moment it starts, which is what
// redis-server's key expiry reads; its monotonic clock, which times the
// server's event loop, stays real. rate must be in (0, 100]. (Measured on
// Debian 12's redis-server at x1.02: with FAKETIME_NO_CACHE or without,
// faking the monotonic clock or not, it serves and expires keys alike;
// the cache only delays reading a changed FAKETIME, which is fixed here.)
//
// Debian's redis-server links jemalloc, whose start-up reads the clock
// through libfaketime before libfaketime has initialised, which itself
// allocates: the server deadlocks before it listens (libfaketime's issue
// 130). Preloading glibc's libc_malloc_debug.so.0 first gives the server
// glibc's malloc (jemalloc then only answers its statistics calls) and
// breaks the cycle.
func FaketimeEnv(rate float64) ([]string, error) {
	if math.IsNaN(rate) || rate <= 0 || rate > 100 {
		return nil, fmt.Errorf("safety: clock rate %v must be in (0, 100]", rate)
	}
	ft, err := Libfaketime()
	if err != nil {
		return nil, err
	}
	md, err := findLib("", mallocDebugGlobs)
	if err != nil {
		return nil, fmt.Errorf("%w: glibc's libc_malloc_debug.so.0 (libc6 2.34 or later) is missing", ErrNoFaketime)
	}
	return []string{
		"LD_PRELOAD=" + md + ":" + ft,
		"FAKETIME=+0 x" + strconv.FormatFloat(rate, 'f', -1, 64),
		"FAKETIME_DONT_FAKE_MONOTONIC=1",
	}, nil
}

// StartFastServer starts a redis-server (redistest.StartServer, with opts)
// whose wall clock runs rate times as fast as the real one (FaketimeEnv):
// a key set with PX d on it expires after d/rate of real time.
func StartFastServer(ctx context.Context, rate float64, opts ...redistest.Option) (*redistest.Server, error) {
	env, err := FaketimeEnv(rate)
	if err != nil {
		return nil, err
	}
	return redistest.StartServer(ctx, append(opts, redistest.WithEnv(env...))...)
}

// MeasureExpiry sets a key of its own with PX ttl on the server at addr
// and returns how long it lived in real time: from just before the SET
// was sent until the first PTTL that found it gone, asked every
// millisecond (so the figure is late by up to a poll and a round trip,
// never early). It deletes the key if ctx ends first.
func MeasureExpiry(ctx context.Context, addr string, ttl time.Duration) (time.Duration, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, PoolSize: 1})
	defer c.Close()
	key := fmt.Sprintf("safety:expiry:%d", time.Now().UnixNano())
	start := time.Now()
	if err := c.Set(ctx, key, "1", ttl).Err(); err != nil {
		return 0, fmt.Errorf("safety: measuring expiry on %s: %w", addr, err)
	}
	for {
		left, err := c.PTTL(ctx, key).Result()
		if err != nil {
			cleanUp(ctx, c, key)
			return 0, fmt.Errorf("safety: measuring expiry on %s: %w", addr, err)
		}
		if left == -2 { // gone (go-redis passes PTTL's -2 through as -2 ns)
			return time.Since(start), nil
		}
		if err := waitCtx(ctx, time.Millisecond); err != nil {
			cleanUp(ctx, c, key)
			return 0, err
		}
	}
}

// cleanUp deletes key, within a second, even after ctx has ended.
func cleanUp(ctx context.Context, c *redis.Client, key string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	c.Del(ctx, key)
}
