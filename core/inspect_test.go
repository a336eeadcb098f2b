package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core"
)

// Holder picks the value on the most nodes, and its time left is the
// time until fewer than a quorum hold it: the quorum-th longest TTL, a
// key without expiry counting as the longest. Nodes that did not answer
// count for nothing.
func TestInspectHolder(t *testing.T) {
	l, nodes := newLocker(t, 5, core.WithKeyPrefix("p:"))
	ctx := context.Background()
	nodes[0].Set("p:k", "a", 5*time.Second)
	nodes[1].Set("p:k", "a", 0) // no expiry
	nodes[2].Set("p:k", "a", time.Second)
	nodes[3].Set("p:k", "b", time.Hour)
	nodes[4].Stop()

	st, err := l.Inspect(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, "k", st.Key)
	assert.Equal(t, 3, st.Quorum)
	value, on, ttl := st.Holder()
	assert.Equal(t, "a", value)
	assert.Equal(t, 3, on)
	assert.True(t, st.Held())
	assert.InDelta(t, time.Second, ttl, float64(100*time.Millisecond), "the third longest of no expiry, 5s, 1s")
	assert.Equal(t, time.Duration(-1), st.Nodes[1].TTL)
	assert.Equal(t, "b", st.Nodes[3].Value)
	assert.Equal(t, core.OutcomeFailed, st.Nodes[4].Outcome)
	assert.Error(t, st.Nodes[4].Err)
	assert.Empty(t, st.Nodes[4].Value)

	nodes[2].Del("p:k")
	st, err = l.Inspect(ctx, "k")
	require.NoError(t, err)
	value, on, ttl = st.Holder()
	assert.Equal(t, []any{"a", 2, time.Duration(-1)}, []any{value, on, ttl}, "below a quorum: until the last expires")
	assert.False(t, st.Held())

	nodes[3].Stop()
	nodes[2].Stop()
	_, err = l.Inspect(ctx, "k")
	var qe *core.QuorumError
	require.True(t, errors.As(err, &qe), "%v", err)
	assert.Equal(t, core.OpInspect, qe.Op)
	assert.ErrorIs(t, err, core.ErrUnavailable)
}

// Inspect refuses what Acquire refuses, and a closed Locker.
func TestInspectMisuse(t *testing.T) {
	l, _ := newLocker(t, 1)
	_, err := l.Inspect(context.Background(), "")
	assert.ErrorIs(t, err, core.ErrInvalidArgument)
	//lint:ignore SA1012 a nil context is the misuse under test
	_, err = l.Inspect(nil, "k")
	assert.ErrorIs(t, err, core.ErrInvalidArgument)
	_, err = l.Inspect(context.Background(), "quorumlock:birth")
	assert.ErrorIs(t, err, core.ErrInvalidArgument)
	var zero *core.Locker
	_, err = zero.Inspect(context.Background(), "k")
	assert.ErrorIs(t, err, core.ErrInvalidArgument)
	require.NoError(t, l.Close())
	_, err = l.Inspect(context.Background(), "k")
	assert.ErrorIs(t, err, core.ErrClosed)
}

// A KeyState made by hand, without a quorum, holds nothing and does not
// panic.
func TestKeyStateZero(t *testing.T) {
	var zero core.KeyState
	assert.False(t, zero.Held())
	byHand := core.KeyState{Nodes: []core.NodeState{{NodeResult: core.NodeResult{Outcome: core.OutcomeOK}, Value: "v", TTL: time.Second}}}
	assert.True(t, byHand.Held(), "one node of one, quorum unset: held")
	v, on, ttl := byHand.Holder()
	assert.Equal(t, []any{"v", 1, time.Second}, []any{v, on, ttl})
}
