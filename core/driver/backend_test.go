package driver_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core/driver"
)

type testConfig struct {
	driver.NodeConfig
	driver.DialConfig
}

// Options apply in order, nil ones skipped, and show themselves as written.
func TestConfigure(t *testing.T) {
	opts := []driver.Option[testConfig]{
		driver.WithName[testConfig]("a"), nil, driver.WithName[testConfig]("b"),
		driver.WithCloseClient[testConfig](true), driver.WithTLSConfig[testConfig](nil),
		driver.WithCredentials[testConfig]("u", "secret"),
	}
	c := driver.Configure(&testConfig{}, opts)
	assert.Equal(t, "b", c.Name, "the later option wins")
	assert.True(t, c.CloseClient)
	assert.False(t, c.TLS, "WithTLSConfig(nil) changes nothing")
	assert.Equal(t, `WithName("a")`, opts[0].String())
	assert.Equal(t, "WithCredentials(...)", opts[5].String(), "credentials are elided")

	_, err := driver.PrepareDial("test", []string{"127.0.0.1:1"}, &testConfig{},
		[]driver.Option[testConfig]{driver.WithConnectWait[testConfig](-1)})
	require.ErrorIs(t, err, driver.ErrInvalidArgument)
	assert.ErrorContains(t, err, "test: Dial: WithConnectWait(-1ns): the wait is negative")
}

// The last watch of a channel to leave is told so, once.
func TestWatchesLeave(t *testing.T) {
	var w driver.Watches
	a, b := w.Add("c"), w.Add("c")
	other := w.Add("d")
	assert.False(t, a(), "b still watches c")
	assert.False(t, a(), "a second leave repeats the first")
	assert.True(t, b(), "b was the last watch of c")
	assert.True(t, other())
	assert.True(t, w.Add("c")(), "a new watch of c counts from zero")
}

// An owner closes its client once; a node that does not own it never.
func TestOwner(t *testing.T) {
	closes := 0
	client := closer(func() error { closes++; return errors.New("closed") })
	owned := driver.NewOwner(true)
	assert.EqualError(t, owned.Close(client), "closed")
	assert.NoError(t, owned.Close(client))
	assert.True(t, owned.Closed())
	var borrowed driver.Owner
	assert.NoError(t, borrowed.Close(client))
	assert.Equal(t, 1, closes)
	assert.Equal(t, driver.KindContext, driver.Classification(context.Canceled, false))
	assert.Equal(t, driver.KindNoScript, driver.Classification(errors.New("NOSCRIPT"), true))
}

type closer func() error

func (c closer) Close() error { return c() }

// Each Redis backend is its client's calls and error classes: at most 300
// lines of code (not comments, not blank) outside its tests; what they
// share is in this package.
func TestRedisBackendsAreTransport(t *testing.T) {
	for _, b := range []string{"goredis", "redigo", "rueidis", "valkey"} {
		files, err := filepath.Glob(filepath.Join("..", "..", "backends", b, "*.go"))
		require.NoError(t, err)
		require.NotEmpty(t, files, "backends/%s: no files found", b)
		lines := 0
		for _, f := range files {
			if !strings.HasSuffix(f, "_test.go") {
				lines += codeLines(t, f)
			}
		}
		assert.LessOrEqual(t, lines, 300, "backends/%s has %d lines of code", b, lines)
	}
}

// codeLines counts the lines of file that are neither blank nor comments
// alone.
func codeLines(t *testing.T, file string) int {
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	n := 0
	for s := bufio.NewScanner(f); s.Scan(); {
		if line := strings.TrimSpace(s.Text()); line != "" && !strings.HasPrefix(line, "//") {
			n++
		}
	}
	return n
}

// AfterDone's stop waits for an fn that has begun, and cancels one that
// has not.
func TestAfterDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		started, release := make(chan struct{}), make(chan struct{})
		stop := driver.AfterDone(ctx, func() { close(started); <-release })
		cancel()
		<-started
		var returned atomic.Bool
		go func() { stop(); returned.Store(true) }()
		synctest.Wait()
		assert.False(t, returned.Load(), "stop returned while fn ran")
		close(release)
		synctest.Wait()
		assert.True(t, returned.Load(), "stop returned once fn ended")

		ran := false
		driver.AfterDone(t.Context(), func() { ran = true })()
		synctest.Wait()
		assert.False(t, ran, "fn ran after stop before ctx ended")
	})
}
