package safety

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/rs/zerolog"
	zlog "github.com/rs/zerolog/log"
)

// Proxy is a toxiproxy proxy (github.com/Shopify/toxiproxy/v2, in
// process) in front of one node, on its own loopback port. Its faults:
//
//   - SetLatency: toxiproxy's latency toxic on replies;
//   - SetBandwidth: its bandwidth toxic on replies;
//   - Down and Up: the proxy disabled (every connection closed, new ones
//     refused) and enabled again on the same port;
//   - Reset: every connection closed at once (disable, then enable);
//   - Partition: a hung link. Connections stay open and new ones are
//     accepted, but no byte passes either way. Once healed, a connection
//     that lost bytes is cut at its next byte, so a request sent during
//     the partition is never executed later and no reply is matched to
//     the wrong request; idle connections survive.
//
// Partition is the one fault of the rig's own making, a toxic registered
// with toxiproxy and installed on every link from the start: toxiproxy's
// timeout toxic, once removed (and reset_peer, once fired), stops reading
// its input while the toxic before it still sends, which leaves that
// goroutine blocked for ever; a toxic that is never removed leaves none.
// Heal removes every fault. Close disables the proxy and waits until every
// link through it has ended.
type Proxy struct {
	tp   *toxiproxy.Proxy
	addr string
	hole *hole

	mu        sync.Mutex // serialises the fault setters
	latency   bool
	bandwidth bool
	down      bool
	closed    bool // by Close: never enabled again
}

var (
	apiOnce sync.Once
	api     *toxiproxy.ApiServer
)

// toxiServer is the toxiproxy server every Proxy belongs to, logging
// nothing: its per-connection logs would drown a run's, and its
// bandwidth toxic logs through zerolog's global logger, silenced here
// too.
func toxiServer() *toxiproxy.ApiServer {
	apiOnce.Do(func() {
		zlog.Logger = zerolog.Nop()
		toxics.Register(holeType, new(holeToxic))
		api = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	})
	return api
}

// Proxies listen below the ephemeral port range (Linux's default is
// 32768-60999): Down and Reset close a proxy's listener and open it again
// on the same port, and a port the kernel can hand out as the source of
// an outgoing connection (such as a client redialling the proxy) may be
// taken meanwhile. Ports in [proxyPortMin, proxyPortMin+proxyPorts) are
// drawn at random until one is free.
const (
	proxyPortMin = 20000
	proxyPorts   = 12000
	proxyTries   = 100
)

// StartProxy starts a proxy to upstream on a free loopback port, below
// the ephemeral range.
func StartProxy(upstream string) (*Proxy, error) {
	var err error
	for range proxyTries {
		listen := fmt.Sprintf("127.0.0.1:%d", proxyPortMin+rand.IntN(proxyPorts))
		var p *Proxy
		if p, err = startProxy(upstream, listen); err == nil {
			return p, nil
		}
	}
	return nil, fmt.Errorf("safety: proxy to %s: no free port in %d tries: %w", upstream, proxyTries, err)
}

// startProxy starts a proxy to upstream listening on listen.
func startProxy(upstream, listen string) (*Proxy, error) {
	tp := toxiproxy.NewProxy(toxiServer(), "node-"+upstream, listen, upstream)
	p := &Proxy{tp: tp, hole: &hole{done: make(chan struct{})}}
	for _, dir := range []string{"upstream", "downstream"} {
		w, err := p.addToxic(fmt.Sprintf(`{"name":"hole_%s","type":%q,"stream":%q,"toxicity":1}`, dir, holeType, dir))
		if err != nil {
			return nil, err
		}
		// No link exists yet: every link started later runs this one.
		w.Toxic = &holeToxic{h: p.hole}
	}
	if err := tp.Start(); err != nil {
		return nil, fmt.Errorf("safety: proxy to %s: %w", upstream, err)
	}
	p.addr = tp.Listen // written by Start, read here after it
	return p, nil
}

// Addr is the address clients dial.
func (p *Proxy) Addr() string { return p.addr }

func (p *Proxy) addToxic(js string) (*toxics.ToxicWrapper, error) {
	w, err := p.tp.Toxics.AddToxicJson(strings.NewReader(js))
	if err != nil {
		return nil, fmt.Errorf("safety: proxy %s: toxic %s: %w", p.Addr(), js, err)
	}
	return w, nil
}

func (p *Proxy) removeToxic(name string) error {
	if err := p.tp.Toxics.RemoveToxic(context.Background(), name); err != nil {
		return fmt.Errorf("safety: proxy %s: remove %s: %w", p.Addr(), name, err)
	}
	return nil
}

// SetLatency delays every reply by delay ± jitter (millisecond
// resolution); SetLatency(0, 0) removes the delay.
func (p *Proxy) SetLatency(delay, jitter time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.setLatency(delay, jitter)
}

func (p *Proxy) setLatency(delay, jitter time.Duration) error {
	if p.latency {
		if err := p.removeToxic("latency"); err != nil {
			return err
		}
		p.latency = false
	}
	if delay <= 0 {
		return nil
	}
	_, err := p.addToxic(fmt.Sprintf(`{"name":"latency","type":"latency","stream":"downstream","toxicity":1,"attributes":{"latency":%d,"jitter":%d}}`,
		delay.Milliseconds(), jitter.Milliseconds()))
	p.latency = err == nil
	return err
}

// SetBandwidth limits replies to kbps kilobytes a second; 0 removes the
// limit.
func (p *Proxy) SetBandwidth(kbps int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.setBandwidth(kbps)
}

func (p *Proxy) setBandwidth(kbps int) error {
	if p.bandwidth {
		if err := p.removeToxic("bandwidth"); err != nil {
			return err
		}
		p.bandwidth = false
	}
	if kbps <= 0 {
		return nil
	}
	_, err := p.addToxic(fmt.Sprintf(`{"name":"bandwidth","type":"bandwidth","stream":"downstream","toxicity":1,"attributes":{"rate":%d}}`, kbps))
	p.bandwidth = err == nil
	return err
}

// Partition hangs the node: see Proxy.
func (p *Proxy) Partition() error {
	p.hole.partitioned.Store(true)
	return nil
}

// Down disables the proxy: open connections are closed, new ones
// refused, until Up or Heal.
func (p *Proxy) Down() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tp.Stop()
	p.down = true
	return nil
}

// Up enables a proxy that was Down, on the same port.
func (p *Proxy) Up() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.up()
}

func (p *Proxy) up() error {
	if !p.down || p.closed {
		return nil
	}
	if err := p.tp.Start(); err != nil {
		return fmt.Errorf("safety: proxy %s: enable: %w", p.Addr(), err)
	}
	p.down = false
	return nil
}

// Reset closes every open connection at once; the next dial works.
func (p *Proxy) Reset() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return nil
	}
	p.tp.Stop()
	p.down = true
	return p.up()
}

// Heal removes every fault.
func (p *Proxy) Heal() error {
	p.hole.partitioned.Store(false)
	p.mu.Lock()
	defer p.mu.Unlock()
	return errors.Join(p.setLatency(0, 0), p.setBandwidth(0), p.up())
}

// linkGrace bounds how long Close waits for the links to end.
const linkGrace = 5 * time.Second

// Close disables the proxy for good and returns once every link through
// it has ended, or with an error after linkGrace.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.tp.Stop() // returns once no link can start: every links.Add is done
	p.down = true
	if !p.closed {
		p.closed = true
		close(p.hole.done)
	}
	p.mu.Unlock()
	ended := make(chan struct{})
	go func() { p.hole.links.Wait(); close(ended) }()
	t := time.NewTimer(linkGrace)
	defer t.Stop()
	select {
	case <-ended:
		return nil
	case <-t.C: // the waiting goroutine stays, with the links it waits for
		return fmt.Errorf("safety: proxy %s: links still open %v after Close", p.Addr(), linkGrace)
	}
}

const holeType = "quorumlock_hole"

// hole is a proxy's partition switch, shared by every link's hole toxic;
// links counts the links that are running; done is closed by Close.
type hole struct {
	partitioned atomic.Bool
	links       sync.WaitGroup
	done        chan struct{}
}

// holeToxic drops every byte while its hole is closed and cuts a link
// that lost bytes at its first byte after. It never stops reading its
// input before the input ends, so the toxic before it never blocks.
type holeToxic struct{ h *hole }

// holeLink is a link's state: whether it lost bytes.
type holeLink struct{ lost bool }

// NewState is called once per link (toxiproxy's StatefulToxic), when the
// link starts: the link is counted until its input ends. The toxic is
// never added to a running proxy, so no other call happens.
func (t *holeToxic) NewState() any {
	if t.h != nil {
		t.h.links.Add(1)
	}
	return &holeLink{}
}

// Pipe forwards, drops or cuts; it returns when interrupted (toxiproxy
// runs it again at once) or when the link's input ends.
func (t *holeToxic) Pipe(stub *toxics.ToxicStub) {
	st := stub.State.(*holeLink)
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			switch {
			case c == nil:
				stub.Close()
				t.h.links.Done()
				return
			case t.h.partitioned.Load():
				st.lost = true
			case st.lost:
				stub.Close() // the writer ends the connection
				for range stub.Input {
				}
				t.h.links.Done()
				return
			default:
				select {
				case stub.Output <- c:
				case <-t.h.done: // the writer may have ended: drop
				}
			}
		}
	}
}
