package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/core"
)

// ErrShared is returned by fault methods called on shared servers: faults
// need servers that only the calling test uses (Harness.Isolated).
var ErrShared = errors.New("conformance: faults need isolated servers")

// Harness supplies servers of one backend to the suite. One Harness serves
// a whole Run.
type Harness interface {
	// Shared returns n servers shared by the tests of the run, which must not
	// inject faults into them and isolate themselves by key. The harness
	// starts them once and stops them in Close.
	Shared(t *testing.T, n int) Servers
	// Isolated returns n servers that only the calling test uses; faults may
	// be injected. When the test ends they are stopped, or reset to what new
	// servers are and handed to a later test.
	Isolated(t *testing.T, n int) Servers
	// ClosedNode returns a node whose underlying client has been closed:
	// every call on it must fail, and never panic or hang.
	ClosedNode(t *testing.T) core.Node
	// Close stops whatever the harness started.
	Close() error
}

// HarnessMaker makes the Harness of one Run.
type HarnessMaker func(t *testing.T) Harness

// Servers is a set of independent servers (or in-process stores) under
// test, with direct access to their keys and, for isolated servers, faults.
// Server i is the one behind the i-th node of Nodes. Methods that touch a
// server bypass the backend under test.
type Servers interface {
	// Len is the number of servers.
	Len() int
	// Nodes returns fresh nodes of the backend under test, one per server,
	// in order: new clients on every call, so that several Lockers can
	// share the servers. What they hold is released when the test ends.
	Nodes(t *testing.T) []core.Node

	// Get reads key on server i: its value, its remaining TTL (0 when it
	// has none) and whether it exists.
	Get(ctx context.Context, i int, key string) (value string, ttl time.Duration, ok bool, err error)
	// Set writes key on server i with an expiry (0: none), as a rival lock
	// holder or plain data would.
	Set(ctx context.Context, i int, key, value string, ttl time.Duration) error
	// Del deletes key on server i, as an operator or a flush would.
	Del(ctx context.Context, i int, key string) error

	// FlushScripts empties the script cache of server i (SCRIPT FLUSH).
	FlushScripts(ctx context.Context, i int) error
	// Stop takes server i down; its keys are lost.
	Stop(i int) error
	// StopKeepingData takes server i down the way a server with
	// persistence goes down: the next Start brings it back with the keys
	// it held when it stopped (those not expired since). It does not
	// change what a later plain Stop does.
	StopKeepingData(i int) error
	// Start brings a stopped server i back: empty after Stop, with its
	// keys after StopKeepingData. Scripts are never kept.
	Start(i int) error
	// Pause makes server i accept requests and answer none (SIGSTOP).
	Pause(i int) error
	// Resume undoes Pause.
	Resume(i int) error
}
