package rueidis

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/quorumlock/quorumlock/conformance/misuse"
	"github.com/quorumlock/quorumlock/core/driver"
)

func TestExplainClusterReplies(t *testing.T) {
	moved := errors.New("MOVED 3999 127.0.0.1:7002")
	n := &Node{}
	misuse.RequireExplains(t, n.explain, moved, "without ForceSingleClient")

	c := &Node{common: driver.Common{Cluster: true}}
	assert.Equal(t, moved, c.explain(moved), "a cluster client's own redirection is left alone")
}
