package valkey

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/valkey-io/valkey-go"

	"github.com/quorumlock/quorumlock/conformance/misuse"
)

func TestExplainClusterReplies(t *testing.T) {
	moved := errors.New("MOVED 3999 127.0.0.1:7002")
	misuse.RequireExplains(t, (&Node{}).explain, moved, "without ForceSingleClient")
	assert.Equal(t, moved, (&Node{cluster: true}).explain(moved), "a cluster client's own redirection is left alone")
	assert.NoError(t, (&Node{}).explain(valkey.Nil), "a nil reply is no error")
	assert.NoError(t, (&Node{cluster: true}).explain(valkey.Nil))
}

// Lua's false, a RESP3 false, is nil; true is 1, as RESP2 has them.
func TestNormalize(t *testing.T) {
	assert.Nil(t, normalize(false))
	assert.Equal(t, int64(1), normalize(true))
	assert.Equal(t, []any{int64(1), nil, "s", int64(7)}, normalize([]any{true, false, "s", int64(7)}))
}
