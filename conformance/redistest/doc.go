// Package redistest starts and controls real redis-server processes for
// tests, and implements the conformance harness over them.
//
// Servers listen on free loopback ports (never 6379), run without
// persistence, and are owned by the test that started them: Stop, Kill,
// Pause (SIGSTOP), Resume (SIGCONT) and Restart act on one process, and
// Close removes it. A server dies with the test process.
//
// The redis-server binary comes from $QUORUMLOCK_REDIS_SERVER or PATH.
// RequireServer fails the test under CI=true when there is none, and skips
// it otherwise.
package redistest
