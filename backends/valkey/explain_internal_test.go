package valkey

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/valkey-io/valkey-go"

	"github.com/quorumlock/quorumlock/conformance/misuse"
	"github.com/quorumlock/quorumlock/core/driver"
)

func TestExplainClusterReplies(t *testing.T) {
	moved := errors.New("MOVED 3999 127.0.0.1:7002")
	misuse.RequireExplains(t, (&Node{}).explain, moved, "without ForceSingleClient")
	assert.Equal(t, moved, (&Node{common: driver.Common{Cluster: true}}).explain(moved), "a cluster client's own redirection is left alone")
	assert.NoError(t, (&Node{}).explain(valkey.Nil), "a nil reply is no error")
	assert.NoError(t, (&Node{common: driver.Common{Cluster: true}}).explain(valkey.Nil))
}
