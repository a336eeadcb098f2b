package driver_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// replyError stands for a driver's error type for server error replies.
type replyError string

func (e replyError) Error() string { return string(e) }

func TestExplainCluster(t *testing.T) {
	assert.NoError(t, driver.ExplainCluster(nil, "advice"))
	for _, reply := range []string{
		"MOVED 3999 127.0.0.1:7002",
		"ASK 3999 127.0.0.1:7002",
		"CROSSSLOT Keys in request don't hash to the same slot",
	} {
		err := driver.ExplainCluster(replyError(reply), "build it with X")
		require.ErrorIs(t, err, core.ErrInvalidArgument, reply)
		var re replyError
		require.ErrorAs(t, err, &re, "the driver's error stays reachable")
		assert.Equal(t, replyError(reply), re)
		var ce *driver.ClusterMemberError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, reply+": this server is a Redis Cluster member, not an independent master, "+
			"and a client of one server cannot follow the cluster's redirections; a whole Redis Cluster is one Redlock node: build it with X",
			err.Error())
	}
	for _, other := range []error{
		errors.New("dial tcp 127.0.0.1:1: connect: connection refused"),
		replyError("NOSCRIPT No matching script"),
		replyError("CLUSTERDOWN The cluster is down"),
		replyError("ERR MOVED is not a command"),
	} {
		assert.Equal(t, other, driver.ExplainCluster(other, "advice"), "%v is left alone", other)
	}
}
