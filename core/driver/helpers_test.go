package driver_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core/driver"
)

func TestEvalEach(t *testing.T) {
	n := memory.New()
	n.Set("mine", "v", 0)
	calls := []driver.Call{
		{SHA: driver.ScriptRelease.SHA(), Keys: []string{"mine"}, Args: []string{"v"}},
		{Source: driver.ScriptRelease.Source(), Keys: []string{"mine"}, Args: []string{"v"}},
		{Source: driver.ScriptExtend.Source(), Keys: []string{"other"}, Args: []string{"v", "1000"}},
	}
	driver.EvalEach(t.Context(), n, calls)
	require.ErrorIs(t, calls[0].Err, memory.ErrNoScript, "by SHA before the script is known")
	assert.Equal(t, int64(1), calls[1].Reply)
	assert.Equal(t, int64(0), calls[2].Reply)
	assert.Equal(t, memory.Calls{EvalSHA: 1, Eval: 2}, n.Calls())

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	driver.EvalEach(ctx, n, calls)
	for _, c := range calls {
		require.ErrorIs(t, c.Err, context.Canceled)
		assert.Nil(t, c.Reply)
	}
	assert.Equal(t, memory.Calls{EvalSHA: 1, Eval: 2}, n.Calls(), "nothing sent once ctx has ended")
}

func TestFailAll(t *testing.T) {
	calls := []driver.Call{{Reply: int64(1)}, {Err: errors.New("old")}}
	boom := errors.New("boom")
	driver.FailAll(calls, boom)
	for _, c := range calls {
		assert.Equal(t, boom, c.Err)
		assert.Nil(t, c.Reply)
	}
}
