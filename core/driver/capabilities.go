package driver

import "context"

// Optional node capabilities. A Node may implement any of these small
// interfaces on top of Node; core discovers them with a type assertion and
// falls back to plain Node calls where one is missing, with the same
// results, only slower.

// Batcher is an optional Node capability: running many protocol scripts in
// one round trip (a pipeline). The keep-alive machinery uses it to renew
// every due lock of a Locker with one round trip per node, instead of one
// per lock. Without it, core sends the calls one by one, a few at a time.
type Batcher interface {
	// EvalBatch sends calls in order in one round trip and stores each
	// call's reply and error in it, with the reply types of EvalSHA. A call
	// whose Source is set is sent with EVAL, otherwise with EVALSHA of SHA.
	// Every call must have Reply or Err set when EvalBatch returns; when the
	// batch fails as a whole (connection lost, ctx ended), every call's Err
	// says so. Like every Node method it must return soon after ctx ends.
	EvalBatch(ctx context.Context, calls []Call)
}

// Call is one script call of a batch.
type Call struct {
	SHA    string   // EVALSHA of this SHA, unless Source is set
	Source string   // when set: EVAL of this script
	Keys   []string // KEYS; on a Redis Cluster, all in one slot
	Args   []string // ARGV

	Reply any   // set by EvalBatch: as EvalSHA's reply
	Err   error // set by EvalBatch: as EvalSHA's error
}

// Watcher is an optional Node capability: delivering the notices that
// ScriptRelease publishes (Redis PUBLISH) when it deletes a lock. With it,
// a waiter in Acquire wakes as soon as the holder releases, instead of
// sleeping its whole retry delay. Without it (or when Watch fails), the
// waiter polls with the retry delay, as it always does for locks that
// expire instead of being released.
type Watcher interface {
	// Watch subscribes to channel and returns once the server has
	// confirmed the subscription, so that every later publication on it
	// calls notify with the message published. When the subscription had
	// to be made again (after a lost connection), notify is called once
	// with an empty message, since a release may have been missed. notify
	// runs on the watcher's own goroutine and must not block. The subscription lasts until stop is called; stop ends it
	// and returns only when notify will not be called again and every
	// goroutine Watch started has ended, within a bounded time even when
	// the server no longer answers.
	//
	// A node that cannot subscribe (its client has no pub/sub, or the
	// server refuses it) returns an error matching errors.ErrUnsupported
	// or the driver's error; core then polls.
	Watch(ctx context.Context, channel string, notify func(message string)) (stop func(), err error)
}

// Sharded is an optional Node capability: a node that spreads its keys over
// several servers (a Redis Cluster) says so by returning
// true. The restart guard (WithRestartGuard) leaves such a node out, since
// one birth key cannot speak for every shard, and a script may touch only
// keys of one slot. A node without this method is one server, so a
// wrapper around a node (for metrics, tests) must forward this method.
type Sharded interface {
	Sharded() bool
}
