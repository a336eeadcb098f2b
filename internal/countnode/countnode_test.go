package countnode_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
	"github.com/quorumlock/quorumlock/internal/countnode"
)

// plain hides every optional capability of a memory node.
type plain struct{ core.Node }

// batchOnly keeps only driver.Batcher.
type batchOnly struct {
	core.Node
	driver.Batcher
}

// watchOnly keeps only driver.Watcher.
type watchOnly struct {
	core.Node
	driver.Watcher
}

func TestWrapKeepsCapabilities(t *testing.T) {
	m := memory.New()
	for _, c := range []struct {
		name           string
		inner          core.Node
		batch, watches bool
	}{
		{"plain", plain{m}, false, false},
		{"batcher", batchOnly{m, m}, true, false},
		{"watcher", watchOnly{m, m}, false, true},
		{"both", m, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, counts := countnode.Wrap(c.inner)
			_, isBatcher := n.(driver.Batcher)
			_, isWatcher := n.(driver.Watcher)
			assert.Equal(t, c.batch, isBatcher, "Batcher")
			assert.Equal(t, c.watches, isWatcher, "Watcher")
			assert.Equal(t, m.String(), n.String())

			ctx := context.Background()
			ok, err := n.SetNX(ctx, "k:"+c.name, "v", time.Second)
			require.NoError(t, err)
			require.True(t, ok)
			_, err = n.Eval(ctx, driver.ScriptExtend.Source(), []string{"k:" + c.name}, []string{"v", "1000"})
			require.NoError(t, err)
			_, err = n.EvalSHA(ctx, driver.ScriptExtend.SHA(), []string{"k:" + c.name}, []string{"v", "1000"})
			require.NoError(t, err)
			if b, ok := n.(driver.Batcher); ok {
				calls := []driver.Call{{SHA: driver.ScriptExtend.SHA(), Keys: []string{"k:" + c.name}, Args: []string{"v", "1000"}}}
				b.EvalBatch(ctx, calls)
				require.NoError(t, calls[0].Err)
				assert.Equal(t, int64(1), calls[0].Reply)
			}
			if w, ok := n.(driver.Watcher); ok {
				stop, err := w.Watch(ctx, "ch", func(string) {})
				require.NoError(t, err)
				stop()
			}
			assert.Equal(t, int64(1), counts.SetNX.Load())
			assert.Equal(t, int64(1), counts.Eval.Load())
			assert.Equal(t, int64(1), counts.EvalSHA.Load())
			want := int64(3)
			if c.batch {
				want++
				assert.Equal(t, int64(1), counts.Batches.Load())
			}
			if c.watches {
				want++
				assert.Equal(t, int64(1), counts.Watches.Load())
			}
			assert.Equal(t, want, counts.RoundTrips())
		})
	}
}

// sharded says it is sharded, on top of a memory node's capabilities.
type sharded struct{ *memory.Node }

func (sharded) Sharded() bool { return true }

func TestWrapKeepsSharded(t *testing.T) {
	m := memory.New()
	for name, c := range map[string]struct {
		inner core.Node
		want  bool
	}{
		"plain":               {plain{m}, false},
		"batcher and watcher": {m, false},
		"sharded, all":        {sharded{m}, true},
		"sharded, plain":      {struct{ sharded }{sharded{m}}, true},
	} {
		w, _ := countnode.Wrap(c.inner)
		s, ok := w.(driver.Sharded)
		require.True(t, ok, name)
		assert.Equal(t, c.want, s.Sharded(), name)
	}
}
