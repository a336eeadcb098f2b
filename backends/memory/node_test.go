package memory_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core/driver"
)

// TestDropConnections: every subscription hears one empty notice, as after
// a real backend's resubscription, and stays subscribed; a stopped
// subscription hears nothing more.
func TestDropConnections(t *testing.T) {
	n := memory.New()
	var mu sync.Mutex
	heard := map[string][]string{}
	watch := func(channel string) func() {
		stop, err := n.Watch(t.Context(), channel, func(m string) {
			mu.Lock()
			defer mu.Unlock()
			heard[channel] = append(heard[channel], m)
		})
		require.NoError(t, err)
		return stop
	}
	stopA, stopB := watch("rel:a"), watch("rel:b")
	defer stopA()

	n.DropConnections()
	assert.Equal(t, map[string][]string{"rel:a": {""}, "rel:b": {""}}, heard)

	// Still subscribed: a release that hands the key over publishes the
	// ticket on its owner's channel ("rel:a" for the ticket "a.1").
	ctx := context.Background()
	n.Set("k", "v", time.Minute)
	_, err := n.Eval(ctx, driver.ScriptEnqueue.Source(), []string{"k", "q"}, []string{"a.1", "60000", ""})
	require.NoError(t, err)
	_, err = n.Eval(ctx, driver.ScriptRelease.Source(), []string{"k", "q"}, []string{"v", "rel"})
	require.NoError(t, err)
	assert.Equal(t, []string{"", "a.1"}, heard["rel:a"])

	stopB()
	n.Stop()
	n.DropConnections() // whatever the node's state
	assert.Equal(t, map[string][]string{"rel:a": {"", "a.1", ""}, "rel:b": {""}}, heard)
}

// TestRefuseWatches: Watch fails while on, counted as a call, and
// subscriptions made before stay; off lets it succeed again.
func TestRefuseWatches(t *testing.T) {
	n := memory.New()
	heard := make(chan string, 2)
	stop, err := n.Watch(t.Context(), "rel:a", func(m string) { heard <- m })
	require.NoError(t, err)
	defer stop()
	n.RefuseWatches(true)
	_, err = n.Watch(t.Context(), "rel:b", func(string) {})
	require.ErrorIs(t, err, memory.ErrWatchRefused)
	assert.Equal(t, 2, n.Calls().Watches)
	n.DropConnections()
	assert.Equal(t, "", <-heard, "the subscription made before stays")
	n.RefuseWatches(false)
	stopB, err := n.Watch(t.Context(), "rel:b", func(string) {})
	require.NoError(t, err)
	stopB()
}

// Nil means unset: a nil Option is skipped, WithClock(nil) keeps the clock
// an earlier option set, and WithName("") keeps the default name.
func TestNilOptions(t *testing.T) {
	clock := memory.NewManualClock(time.Now())
	n := memory.New(memory.WithClock(clock), nil, memory.WithClock(nil), memory.WithClock((*memory.ManualClock)(nil)), memory.WithName(""))
	assert.Regexp(t, `^memory-\d+$`, n.String())
	ok, err := n.SetNX(t.Context(), "k", "a", time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	clock.Advance(2 * time.Second)
	ok, err = n.SetNX(t.Context(), "k", "b", time.Second)
	require.NoError(t, err)
	assert.True(t, ok, "the key expired on the manual clock")

	assert.Equal(t, "WithClock(nil)", memory.WithClock(nil).String())
	assert.Equal(t, "WithClock(...)", memory.WithClock(clock).String())
	assert.Equal(t, `WithName("a")`, memory.WithName("a").String())
}

// Every protocol script has an implementation here, and a call with the
// wrong number of keys or arguments fails before it does anything, with an
// error that says what the script takes.
func TestScriptArity(t *testing.T) {
	n := memory.New()
	want := map[driver.Script]string{
		driver.ScriptRelease:        "ERR release script takes 1 or 2 keys and 1 to 3 arguments",
		driver.ScriptEnqueue:        "ERR enqueue script takes 2 or more keys and 3 arguments",
		driver.ScriptDequeue:        "ERR dequeue script takes 1 key and 1 argument",
		driver.ScriptExtend:         "ERR extend script takes 1 key and 2 arguments",
		driver.ScriptAcquireFenced:  "ERR acquire-fenced script takes 2 keys and 2 or 3 arguments",
		driver.ScriptAcquireGuarded: "ERR acquire-guarded script takes 2 or 3 keys and 3 or 4 arguments",
		driver.ScriptAdopt:          "ERR adopt script takes 1 key and no arguments",
		driver.ScriptIdentify:       "ERR identify script takes 1 key and 1 argument",
		driver.ScriptInspect:        "ERR inspect script takes 1 or 2 keys and no arguments",
		driver.ScriptRaiseFence:     "ERR raise-fence script takes 1 or more keys and 1 argument",
		driver.ScriptAcquireAll:     "ERR acquire-all script takes 1 or more keys and 5 arguments",
		driver.ScriptExtendAll:      "ERR extend-all script takes 1 or more keys and 2 arguments",
		driver.ScriptReleaseAll:     "ERR release-all script takes 1 or more keys and 2 or 3 arguments",
		driver.ScriptAcquireShared:  "ERR acquire-shared: invalid TTL b", // four of each fits: the TTL is checked
		driver.ScriptExtendShared:   "ERR extend-shared script takes 2 keys and 2 arguments",
		driver.ScriptReleaseShared:  "ERR release-shared script takes 2 or 3 keys and 1 or 2 arguments",
		driver.ScriptWithdraw:       "ERR withdraw script takes 2 or 3 keys and 2 or 3 arguments",
		driver.ScriptLeader:         "ERR leader script takes 2 keys and no arguments",
	}
	four := []string{"a", "b", "c", "d"}
	for _, s := range driver.Scripts() {
		_, err := n.Eval(t.Context(), s.Source(), four, four)
		assert.EqualError(t, err, want[s], s.Name())
	}
	assert.Equal(t, []string{}, n.Keys(), "nothing written")
}
