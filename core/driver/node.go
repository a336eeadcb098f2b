package driver

import (
	"context"
	"strconv"
	"time"
)

// Node is one independent Redis master (or one Redis Cluster, or an
// in-process stand-in) as seen by the lock protocol: the driver seam.
//
// A Node is a transport. It runs the commands core gives it on its server,
// turns a nil reply into a plain result, and says what its errors mean; it
// never retries, never picks keys or values, and never falls back from
// EVALSHA to EVAL on its own. All methods must be safe for concurrent use,
// and every method that talks to the server must return soon after ctx is
// done.
//
// Errors are returned as the driver made them (unwrapped), so users can
// still reach them with errors.As; Classify tells core what they mean.
type Node interface {
	// SetNX runs SET key value NX PX ttl, with ttl in whole milliseconds
	// (core passes only positive whole milliseconds). It reports whether the
	// key was set; a key that already exists is (false, nil).
	SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error)

	// EvalSHA runs EVALSHA sha len(keys) keys... args... . A Lua false or nil
	// reply is (nil, nil); an integer reply is an int64; a bulk or status
	// string is a string; an array is a []any of these.
	EvalSHA(ctx context.Context, sha string, keys, args []string) (any, error)

	// Eval runs EVAL script len(keys) keys... args..., with replies as for
	// EvalSHA. Redis caches the script, so the next EvalSHA of it succeeds.
	Eval(ctx context.Context, script string, keys, args []string) (any, error)

	// Classify says what an error returned by this node's methods means.
	Classify(err error) ErrorKind

	// String names the node for errors, logs and metrics, and orders the
	// nodes (the first by name is the herald, the same in every process):
	// typically its address, the same for a server whatever the driver.
	// Two nodes of one Locker must not have the same name: core refuses
	// them. Names do not tell servers apart, though: which server a node
	// is, core asks the server itself (IdentityKey), so that one server
	// reached under two names votes once.
	String() string

	// Close releases what the node itself holds. A node built around a
	// client the user created does not close that client.
	Close() error
}

// ErrorKind is a Node's classification of one of its errors.
type ErrorKind uint8

const (
	// KindNodeFailure: the node did not do what was asked, or may not have
	// (connection refused or lost, I/O timeout, client closed, server error).
	// It is the classification of any error a node cannot place.
	KindNodeFailure ErrorKind = iota
	// KindContext: the call ended because its context ended.
	KindContext
	// KindNoScript: EVALSHA found no script with that SHA (Redis's NOSCRIPT);
	// core then sends the script with EVAL.
	KindNoScript
)

// String returns "node-failure", "context" or "no-script".
func (k ErrorKind) String() string {
	switch k {
	case KindNodeFailure:
		return "node-failure"
	case KindContext:
		return "context"
	case KindNoScript:
		return "no-script"
	default:
		return "error-kind(" + strconv.Itoa(int(k)) + ")"
	}
}
