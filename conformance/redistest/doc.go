// Package redistest starts and controls real redis-server processes for
// tests, and implements the conformance harness over them.
//
// Servers listen on free loopback ports (never 6379), run without
// persistence, and are owned by the test that started them: Stop, Kill,
// Pause (SIGSTOP), Resume (SIGCONT) and Restart act on one process, and
// Close removes it. A server dies with the test process.
//
// StartCluster forms a Redis Cluster of masters (no replicas, slots split
// evenly, full coverage not required, so a dead master takes down only its
// own slots) and waits until every master agrees, about two seconds, most
// of it Redis's own delay before a new master accepts writes.
//
// Harness, MixedHarness and ClusterHarness implement the conformance
// harness over single servers, single servers reached through several
// drivers, and 3-master clusters; Driver and ClusterDriver give
// conformance.RunCrossDriver its drivers. A harness keeps the servers (or
// clusters, formed once) of isolated checks in a pool: when a check ends,
// its servers are reset in the background to what new ones are (resumed;
// started again if stopped, or if their configuration or users changed;
// other clients disconnected; FLUSHALL, SCRIPT FLUSH, FUNCTION FLUSH;
// adopted; a cluster's killed master restarted from its nodes.conf and
// awaited until no master flags another as failing), and handed to a later
// check. Only their uptime and process id tell them from new ones. Close
// stops them.
//
// RunDial, RunDialSecurity and RequireDialCluster check what every
// backend's Dial promises; RunDatabases, that one server is one vote
// through any database; StartTestServer, TestContext, AdminClient and
// RequireHeldEverywhere serve a backend's own tests. A package's tests
// share servers through SharedServers (started once per test binary, no
// faults) and TestServers (a test's own, from the binary's pool, reset as
// a harness resets them); Main stops both.
//
// The redis-server binary comes from $QUORUMLOCK_REDIS_SERVER or PATH.
// RequireServer fails the test under CI=true when there is none, and skips
// it otherwise.
package redistest
