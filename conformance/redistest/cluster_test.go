package redistest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core/driver"
)

func TestCluster(t *testing.T) {
	RequireServer(t)
	t.Parallel()
	ctx := t.Context()
	start := time.Now()
	c, err := StartCluster(ctx, 3)
	require.NoError(t, err)
	t.Logf("cluster of 3 masters healthy after %v", time.Since(start))
	t.Cleanup(func() { assert.NoError(t, c.Close()) })

	// Keys land on the master MasterOfSlot names, at the slot core computes.
	perMaster := make([]int, 3)
	for i := range 60 {
		key := fmt.Sprintf("k%d", i)
		require.NoError(t, c.Control().Set(ctx, key, "v", 0).Err())
		slot, err := c.Control().ClusterKeySlot(ctx, key).Result()
		require.NoError(t, err)
		assert.Equal(t, int64(driver.HashSlot(key)), slot, key)
		m := c.MasterOfSlot(driver.HashSlot(key))
		perMaster[m]++
		direct := plainClient(c.Masters()[m].Addr())
		n, err := direct.Exists(ctx, key).Result()
		direct.Close()
		require.NoError(t, err)
		assert.Equal(t, int64(1), n, "key %s on master %d", key, m)
	}
	for m, n := range perMaster {
		assert.Positive(t, n, "master %d got no key", m)
	}

	// A restarted cluster comes back empty and healthy.
	require.NoError(t, c.Stop())
	start = time.Now()
	require.NoError(t, c.Restart(ctx))
	t.Logf("restarted cluster healthy after %v", time.Since(start))
	n, err := c.Control().Exists(ctx, "k1").Result()
	require.NoError(t, err)
	assert.Zero(t, n)
	require.NoError(t, c.Control().Set(ctx, "k1", "v", 0).Err())

	// A killed master takes only its own slots down.
	require.NoError(t, c.Masters()[0].Kill())
	for i := range 30 {
		key := fmt.Sprintf("x%d", i)
		err := c.Control().Set(context.Background(), key, "v", 0).Err()
		if c.MasterOfSlot(driver.HashSlot(key)) == 0 {
			assert.Error(t, err, key)
		} else {
			assert.NoError(t, err, key)
		}
	}
}
