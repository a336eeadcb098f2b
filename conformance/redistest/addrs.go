package redistest

import (
	"net"
	"strconv"
	"testing"
)

// DeadAddr returns a loopback address where nothing listens, so that a
// connection to it is refused at once: a server that is down.
func DeadAddr(t testing.TB) string {
	t.Helper()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(port)
}

// SilentAddr returns the loopback address of a TCP listener that never
// accepts: the kernel completes each connection into the listener's
// backlog, and nothing ever reads from it or answers, as with a server
// that hangs (paused, or behind a black-holing network). The listener is
// closed, resetting its connections, when the test ends.
func SilentAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: listening: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l.Addr().String()
}
