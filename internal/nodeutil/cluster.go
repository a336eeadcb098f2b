package nodeutil

import (
	"strings"

	"github.com/quorumlock/quorumlock/core"
)

// clusterReplies are the first words of the error replies that only a
// Redis Cluster member sends: a key served by another master (MOVED), a key
// being migrated (ASK), and keys of several slots in one command
// (CROSSSLOT).
var clusterReplies = []string{"MOVED ", "ASK ", "CROSSSLOT "}

// ClusterMemberError is the error of a node built over a client of one
// server when that server turns out to be a member of a Redis Cluster: it
// answered with a cluster redirection or slot error, which a client of one
// server cannot follow. Such a node fails every call on the keys of the
// other masters' slots. It matches core.ErrInvalidArgument (the node was
// built wrongly: retrying cannot help) and, with errors.As, the driver's
// error.
type ClusterMemberError struct {
	// Err is the server's reply, as the driver returned it.
	Err error
	// Advice says how to build a node over a whole cluster with the
	// node's driver.
	Advice string
}

// Error starts with the server's reply ("MOVED 3999 127.0.0.1:7002"),
// then says what is wrong and what to do.
func (e *ClusterMemberError) Error() string {
	return e.Err.Error() + ": this server is a Redis Cluster member, not an independent master, " +
		"and a client of one server cannot follow the cluster's redirections; a whole Redis Cluster is one Redlock node: " + e.Advice
}

// Unwrap returns core.ErrInvalidArgument and the driver's error.
func (e *ClusterMemberError) Unwrap() []error { return []error{core.ErrInvalidArgument, e.Err} }

// ExplainCluster returns err as a *ClusterMemberError with advice when it
// is a Redis Cluster reply (MOVED, ASK or CROSSSLOT), and err unchanged
// otherwise. Backends call it only for nodes over a client of one server:
// a cluster client follows redirections itself.
func ExplainCluster(err error, advice string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, prefix := range clusterReplies {
		if strings.HasPrefix(msg, prefix) {
			return &ClusterMemberError{Err: err, Advice: advice}
		}
	}
	return err
}
