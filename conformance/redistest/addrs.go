package redistest

import (
	"errors"
	"net"
	"strconv"
	"sync"
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

// SilentAddr returns the loopback address of a TCP listener that accepts
// connections and never answers: a server that hangs (paused, or behind a
// black-holing network). The listener and its connections are closed when
// the test ends.
func SilentAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: listening: %v", err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					t.Errorf("redistest: accepting: %v", err)
				}
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}
