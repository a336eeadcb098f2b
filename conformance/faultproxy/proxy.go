package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrClosed is returned by the fault methods of a Proxy that has been
// closed.
var ErrClosed = errors.New("faultproxy: proxy closed")

const (
	// readBuffer is the most one read takes from a socket: one chunk.
	readBuffer = 32 << 10
	// queueLen is how many chunks per direction may wait for their
	// delay before the proxy stops reading that direction.
	queueLen = 256
	// dialTimeout bounds the proxy's connection to the upstream.
	dialTimeout = 5 * time.Second
)

// Proxy is a TCP proxy on a free 127.0.0.1 port in front of one upstream
// address. Each accepted connection gets its own connection to the
// upstream. Its methods are safe for concurrent use.
type Proxy struct {
	upstream string
	addr     string

	ctx    context.Context // cancelled by Close: ends dials to the upstream
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the proxy started

	// ln is the proxy's one listening socket, bound to addr for the
	// proxy's whole life; Refuse stops it listening and Heal starts it
	// again (see listenSocket). raw reaches its file descriptor.
	ln  *net.TCPListener
	raw syscall.RawConn

	mu          sync.Mutex
	latency     time.Duration
	jitter      time.Duration
	partitioned bool
	refusing    bool
	closed      bool
	changed     chan struct{} // closed and replaced whenever the faults change
	links       map[*link]struct{}
}

// Start listens on a free loopback port and forwards every connection to
// upstream ("host:port"). It checks the address's form but does not dial
// it: the proxy may be started before its server, and a connection made
// while nothing answers upstream is reset at once.
func Start(upstream string) (*Proxy, error) {
	if err := checkAddr(upstream); err != nil {
		return nil, err
	}
	ln, err := listenSocket()
	if err != nil {
		return nil, err
	}
	raw, err := ln.SyscallConn()
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		upstream: upstream,
		addr:     ln.Addr().String(),
		ctx:      ctx,
		cancel:   cancel,
		ln:       ln,
		raw:      raw,
		changed:  make(chan struct{}),
		links:    make(map[*link]struct{}),
	}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// checkAddr accepts "host:port" with a non-empty host and a port number.
func checkAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("faultproxy: upstream %q: %w", addr, err)
	}
	if host == "" {
		return fmt.Errorf("faultproxy: upstream %q has no host", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("faultproxy: upstream %q has no valid port", addr)
	}
	return nil
}

// listenSocket listens on a free loopback port, bound so that the socket
// keeps its port when it stops listening.
//
// Refuse stops the socket listening with shutdown(SHUT_RD), which on Linux
// turns a listening TCP socket back into a closed one and wakes Accept, and
// Heal calls listen on it again. Closing the listener and opening a new one
// instead fails now and then: a process forked meanwhile (a redis-server
// another test starts) holds a copy of the descriptor until it execs, so
// the old socket keeps listening, and the new bind fails with EADDRINUSE.
// Shutdown acts on the socket itself, whoever holds a descriptor of it.
//
// A socket keeps its port through shutdown only if bound to that port by
// number, so the port is first found by binding another socket to port 0
// without listening, held by it while the listener binds the same port
// (both have SO_REUSEADDR, as Go sets on listeners), and then released.
// While the listener is shut down its port stays bound: the kernel hands
// it neither to other port-0 binds nor to outgoing connections.
func listenSocket() (*net.TCPListener, error) {
	syscall.ForkLock.RLock()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fd) // not inherited by redis-server processes
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, fmt.Errorf("faultproxy: finding a free port: %w", os.NewSyscallError("socket", err))
	}
	defer syscall.Close(fd)
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		return nil, fmt.Errorf("faultproxy: finding a free port: %w", os.NewSyscallError("setsockopt", err))
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return nil, fmt.Errorf("faultproxy: finding a free port: %w", os.NewSyscallError("bind", err))
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: finding a free port: %w", os.NewSyscallError("getsockname", err))
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		return nil, fmt.Errorf("faultproxy: finding a free port: socket bound to %v", sa)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(in4.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listening on %s: %w", addr, err)
	}
	return ln.(*net.TCPListener), nil
}

// control runs a system call on the listening socket.
func (p *Proxy) control(call func(fd int) error) error {
	var err error
	if cerr := p.raw.Control(func(fd uintptr) { err = call(int(fd)) }); cerr != nil {
		return cerr
	}
	return err
}

// Addr is the address clients dial ("127.0.0.1:port"). It stays the same
// through every fault.
func (p *Proxy) Addr() string { return p.addr }

// Upstream is the address it forwards to.
func (p *Proxy) Upstream() string { return p.upstream }

// SetLatency delays every byte the upstream sends back by latency ± jitter
// (jitter 0: fixed; uniform in [latency-jitter, latency+jitter], never
// below zero), counted from when the proxy read it, keeping the order of
// bytes. Bytes toward the upstream are not delayed, so SetLatency(d, 0)
// adds about d to each request-reply round trip, and the upstream executes
// a command even when its client gives up before the reply arrives. It
// applies at once to connections already open and to bytes already
// waiting; SetLatency(0, 0) removes it. Negative values are an error.
func (p *Proxy) SetLatency(latency, jitter time.Duration) error {
	if latency < 0 || jitter < 0 {
		return fmt.Errorf("faultproxy: negative latency %v or jitter %v", latency, jitter)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	p.latency, p.jitter = latency, jitter
	p.changedLocked()
	return nil
}

// Partition black-holes the node: existing and new connections stay open
// but no byte passes either way, until Heal. Bytes read from either side
// meanwhile are dropped, and so is a FIN; Heal resets the connections that
// lost anything. Bytes the proxy had already begun writing when Partition
// was called may still arrive, like packets already on the wire.
func (p *Proxy) Partition() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if !p.partitioned {
		p.partitioned = true
		p.changedLocked()
	}
	return nil
}

// Reset closes every open connection with a TCP RST on both sides (as a
// peer crash would), even during a partition; later connections work
// (unless partitioned or refused). It is an event, not a fault: Faulty
// does not report it.
func (p *Proxy) Reset() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	links := p.linksLocked()
	p.mu.Unlock()
	for _, l := range links {
		l.close(true)
	}
	return nil
}

// Refuse makes the proxy refuse new connections and cut existing ones (TCP
// RST), until Heal; like a node whose port is closed. Its socket stops
// listening but keeps the port, so a dial fails at once with "connection
// refused", and Heal listens again on the same address.
func (p *Proxy) Refuse() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	if !p.refusing {
		if err := p.control(func(fd int) error { return syscall.Shutdown(fd, syscall.SHUT_RD) }); err != nil {
			p.mu.Unlock()
			return fmt.Errorf("faultproxy: refusing on %s: %w", p.addr, os.NewSyscallError("shutdown", err))
		}
		p.refusing = true
		p.changedLocked()
	}
	links := p.linksLocked()
	p.mu.Unlock()
	for _, l := range links {
		l.close(true)
	}
	return nil
}

// Heal removes every fault (latency, partition, refuse) at once: when it
// returns, the proxy listens again on the same address, bytes pass
// undelayed, and replies held back by latency are sent. Connections that
// lost bytes to a partition are reset; the others carry on.
func (p *Proxy) Heal() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	if p.refusing {
		if err := p.control(func(fd int) error { return syscall.Listen(fd, syscall.SOMAXCONN) }); err != nil {
			p.mu.Unlock()
			return fmt.Errorf("faultproxy: listening again on %s: %w", p.addr, os.NewSyscallError("listen", err))
		}
		p.refusing = false
	}
	p.latency, p.jitter, p.partitioned = 0, 0, false
	var tainted []*link
	for l := range p.links {
		if l.tainted {
			tainted = append(tainted, l)
		}
	}
	p.changedLocked()
	p.mu.Unlock()
	for _, l := range tainted {
		l.close(true)
	}
	return nil
}

// Faulty reports whether any fault is set: latency or jitter, partition,
// or refuse. After Close it reports the faults that were set then.
func (p *Proxy) Faulty() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.latency != 0 || p.jitter != 0 || p.partitioned || p.refusing
}

// Close stops the proxy and every goroutine it started; it returns only
// when they have ended. Open connections are closed and the port is
// released. Idempotent: later calls wait for the same end and return nil;
// the fault methods return ErrClosed.
func (p *Proxy) Close() error {
	p.mu.Lock()
	var (
		links []*link
		err   error
	)
	if !p.closed {
		p.closed = true
		// Stop listening at once even if a forked process holds a copy
		// of the descriptor for a moment (see listenSocket). A refusing
		// socket is not listening: nothing to shut down.
		if !p.refusing {
			_ = p.control(func(fd int) error { return syscall.Shutdown(fd, syscall.SHUT_RD) })
		}
		err = p.ln.Close()
		links = p.linksLocked()
		p.changedLocked()
	}
	p.mu.Unlock()
	p.cancel()
	for _, l := range links {
		l.close(false)
	}
	p.wg.Wait()
	if err != nil {
		return fmt.Errorf("faultproxy: closing %s: %w", p.addr, err)
	}
	return nil
}

// changedLocked wakes every goroutine waiting on the current faults.
func (p *Proxy) changedLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *Proxy) linksLocked() []*link {
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	return links
}

// serve accepts connections until the proxy is closed; while it refuses,
// it waits for Heal.
func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err == nil {
			p.wg.Add(1)
			go p.connect(c.(*net.TCPConn))
			continue
		}
		if errors.Is(err, net.ErrClosed) {
			return
		}
		p.mu.Lock()
		closed, refusing, changed := p.closed, p.refusing, p.changed
		p.mu.Unlock()
		switch {
		case closed:
			return
		case refusing:
			// Not listening (Accept fails with EINVAL): wait for Heal
			// or Close.
			<-changed
		case errors.Is(err, syscall.EINVAL):
			// Refused and healed since Accept failed: listening again.
		default:
			// A passing failure, such as running out of file
			// descriptors: try again shortly.
			select {
			case <-p.ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

// connect dials the upstream for an accepted client and starts the link's
// four goroutines.
func (p *Proxy) connect(client *net.TCPConn) {
	defer p.wg.Done()
	ctx, cancel := context.WithTimeout(p.ctx, dialTimeout)
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", p.upstream)
	cancel()
	if err != nil {
		// Nothing answers upstream: the client's connection is reset.
		_ = client.SetLinger(0)
		_ = client.Close()
		return
	}
	l := &link{p: p, client: client, server: c.(*net.TCPConn), dead: make(chan struct{})}
	p.mu.Lock()
	if p.closed || p.refusing {
		p.mu.Unlock()
		l.close(true)
		return
	}
	p.links[l] = struct{}{}
	p.wg.Add(4)
	p.mu.Unlock()

	toServer := make(chan chunk, queueLen)
	toClient := make(chan chunk, queueLen)
	go l.read(client, toServer)
	go l.write(l.server, toServer, false)
	go l.read(l.server, toClient)
	go l.write(client, toClient, true)
}

// faults is what a link's writer needs to know of the proxy's faults.
type faults struct {
	latency, jitter time.Duration
	changed         <-chan struct{} // closed when these no longer hold
}

// delay draws the delay of one chunk.
func (f faults) delay() time.Duration {
	d := f.latency
	if f.jitter > 0 {
		d += rand.N(2*f.jitter+1) - f.jitter
	}
	return max(d, 0)
}

// pass returns the current faults, or false when the node is partitioned:
// then whatever l was about to pass is dropped, and l is marked for Heal
// to reset, in the same critical section as the check so that Heal cannot
// miss it.
func (p *Proxy) pass(l *link) (faults, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.partitioned {
		l.tainted = true
		return faults{}, false
	}
	return faults{latency: p.latency, jitter: p.jitter, changed: p.changed}, true
}

// chunk is what one read returned, with when it returned.
type chunk struct {
	data []byte
	at   time.Time
}

// link is one client connection and its upstream connection. Each
// direction has a reader, which reads and timestamps chunks, and a writer,
// which applies the faults and writes them on.
type link struct {
	p              *Proxy
	client, server *net.TCPConn
	dead           chan struct{} // closed by close
	once           sync.Once
	halfClosed     atomic.Int32 // directions whose FIN has been passed on
	tainted        bool         // guarded by p.mu: lost bytes or a FIN to a partition
}

// close closes both connections, with a TCP RST when rst is set, and
// forgets the link. Its goroutines end soon after. Idempotent; the caller
// must not hold p.mu.
func (l *link) close(rst bool) {
	l.once.Do(func() {
		if rst {
			_ = l.client.SetLinger(0)
			_ = l.server.SetLinger(0)
		}
		_ = l.client.Close()
		_ = l.server.Close()
		close(l.dead)
		l.p.mu.Lock()
		delete(l.p.links, l)
		l.p.mu.Unlock()
	})
}

// read copies src into q until src ends. At EOF it closes q and leaves the
// rest to the writer; on an error it closes the link, passing on a reset.
func (l *link) read(src *net.TCPConn, q chan<- chunk) {
	defer l.p.wg.Done()
	defer close(q)
	buf := make([]byte, readBuffer)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			select {
			case q <- chunk{data: bytes.Clone(buf[:n]), at: time.Now()}:
			case <-l.dead:
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				l.close(errors.Is(err, syscall.ECONNRESET))
			}
			return
		}
	}
}

// write passes the chunks of q on to dst, applying latency when delayed,
// and passes on the FIN when q is closed.
func (l *link) write(dst *net.TCPConn, q <-chan chunk, delayed bool) {
	defer l.p.wg.Done()
	for {
		var (
			c  chunk
			ok bool
		)
		select {
		case c, ok = <-q:
		case <-l.dead:
			return
		}
		if !ok {
			l.finish(dst)
			return
		}
		if !l.forward(dst, c, delayed) {
			return
		}
	}
}

// forward writes c to dst once its delay has passed, or drops it when the
// node is partitioned by then. A change of faults while it waits is
// applied to c at once. It returns false once the link is closed.
func (l *link) forward(dst *net.TCPConn, c chunk, delayed bool) bool {
	for {
		f, ok := l.p.pass(l)
		if !ok {
			return true // dropped
		}
		if !delayed {
			break
		}
		wait := time.Until(c.at.Add(f.delay()))
		if wait <= 0 {
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-f.changed:
			t.Stop()
			continue
		case <-l.dead:
			t.Stop()
			return false
		}
		select {
		case <-f.changed:
			continue // changed as the timer fired: look again
		default:
		}
		break
	}
	if _, err := dst.Write(c.data); err != nil {
		l.close(false)
		return false
	}
	return true
}

// finish passes the FIN of one direction on (dropping it in a partition),
// and closes the link once both directions are done.
func (l *link) finish(dst *net.TCPConn) {
	select {
	case <-l.dead:
		return
	default:
	}
	if _, ok := l.p.pass(l); !ok {
		return // lost in the partition: Heal resets the link
	}
	_ = dst.CloseWrite()
	if l.halfClosed.Add(1) == 2 {
		l.close(false)
	}
}
