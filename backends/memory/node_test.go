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
