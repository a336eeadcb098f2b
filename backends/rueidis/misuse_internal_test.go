package rueidis

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/quorumlock/quorumlock/conformance/misuse"
)

func TestExplainClusterReplies(t *testing.T) {
	moved := errors.New("MOVED 3999 127.0.0.1:7002")
	n := &Node{}
	misuse.RequireExplains(t, n.explain, moved, "without ForceSingleClient")

	c := &Node{cluster: true}
	assert.Equal(t, moved, c.explain(moved), "a cluster client's own redirection is left alone")
}
