package memory_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// gatedNode holds chosen script calls until a gate opens, or fails them.
type gatedNode struct {
	*memory.Node
	mu    sync.Mutex
	gates map[driver.Script]chan struct{}
	fail  map[driver.Script]bool
	held  chan driver.Script // reports a call waiting at a gate
}

func gate(n *memory.Node) *gatedNode {
	return &gatedNode{Node: n, gates: map[driver.Script]chan struct{}{}, fail: map[driver.Script]bool{}, held: make(chan driver.Script, 16)}
}

func (g *gatedNode) hold(s driver.Script) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	ch := make(chan struct{})
	g.gates[s] = ch
	return ch
}

func (g *gatedNode) wait(ctx context.Context, s driver.Script) error {
	g.mu.Lock()
	ch, fail := g.gates[s], g.fail[s]
	g.mu.Unlock()
	if fail {
		return errors.New("injected: the call never reached the server")
	}
	if ch == nil {
		return nil
	}
	g.held <- s
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gatedNode) EvalSHA(ctx context.Context, sha string, keys, args []string) (any, error) {
	s, _ := driver.ScriptBySHA(sha)
	if err := g.wait(ctx, s); err != nil {
		return nil, err
	}
	return g.Node.EvalSHA(ctx, sha, keys, args)
}

func (g *gatedNode) Eval(ctx context.Context, src string, keys, args []string) (any, error) {
	for _, s := range driver.Scripts() {
		if s.Source() == src {
			if err := g.wait(ctx, s); err != nil {
				return nil, err
			}
		}
	}
	return g.Node.Eval(ctx, src, keys, args)
}

// TestFenceOverlappingRound: a round Q that straddles another holder P's
// whole life (its calls to some nodes are slow: a starved goroutine, a
// busy connection) must not get P's token again (it did when P's raise
// quorum counted nodes that refused P). Q takes n0 and n1 first; P,
// refused there, is granted n2, n3 and n4 (n4 behind), counts n0 and n1,
// held by Q, in its raise quorum, and its raise of n4 fails; P releases
// n4 first; Q's late calls are refused at n2 and n3 (P's release has not
// reached them yet) and granted at n4, from where Q's token is P's.
func TestFenceOverlappingRound(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewNodes(5)
	pn, qn := make([]core.Node, 5), make([]core.Node, 5)
	pg, qg := make([]*gatedNode, 5), make([]*gatedNode, 5)
	for i, m := range mem {
		pg[i], qg[i] = gate(m), gate(m)
		pn[i], qn[i] = pg[i], qg[i]
	}
	opts := []core.Option{core.WithFencing(true), core.WithRestartGuard(0), core.WithNodeTimeout(5 * time.Second),
		core.WithTTL(10 * time.Second), core.WithWakeOnRelease(false)}
	p, err := core.New(pn, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	q, err := core.New(qn, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()

	// Warm up: every counter at 5, then n4 behind at 3 (it missed raises
	// while it was down, as in the fault schedule).
	for range 5 {
		l, err := p.TryAcquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var fence string
	for _, k := range mem[4].Keys() {
		if strings.HasSuffix(k, driver.FenceSuffix) {
			fence = k
		}
	}
	mem[4].Set(fence, "3", 0)

	// Q's grants to n2, n3, n4 are slow.
	var qOpen []chan struct{}
	for i := 2; i < 5; i++ {
		qOpen = append(qOpen, qg[i].hold(driver.ScriptAcquireFenced))
	}
	type res struct {
		l   *core.Lock
		err error
	}
	qDone := make(chan res, 1)
	go func() {
		l, err := q.Acquire(ctx, "k")
		qDone <- res{l, err}
	}()
	for i := 2; i < 5; i++ {
		<-qg[i].held
	}
	// Q holds n0 and n1 by now (their calls are not gated): wait for it.
	for _, m := range mem[:2] {
		require.Eventually(t, func() bool { _, _, ok := m.Get("k"); return ok }, 10*time.Second, time.Millisecond, "Q's grant on %s", m)
	}

	// P: refused at n0 and n1, granted n2, n3 (6) and n4 (4); its raise of n4 fails.
	pg[4].mu.Lock()
	pg[4].fail[driver.ScriptRaiseFence] = true
	pg[4].mu.Unlock()
	lp, err := p.TryAcquire(ctx, "k")
	if err != nil {
		// P's raise quorum counts only the nodes that granted it: n2 and
		// n3, short of a quorum, so P does not hold the lock and nothing
		// can repeat its token.
		t.Logf("P does not get the lock: %v", err)
		var qe *core.QuorumError
		if !errors.As(err, &qe) || !errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("P's failure is not its raise short of a quorum: %v", err)
		}
		if ok, refused, failed := qe.Counts(); ok != 2 || refused != 2 || failed != 1 {
			t.Fatalf("P's raise: %d ok, %d refused, %d failed; want the two granting nodes raised, the two that refused it shown refused, n4 failed", ok, refused, failed)
		}
		for _, ch := range qOpen {
			close(ch)
		}
		if r := <-qDone; r.err != nil {
			t.Fatal(r.err)
		} else {
			_ = r.l.Release(ctx)
		}
		return
	}
	t.Logf("P holds the lock, token %d", lp.Token())
	// P's critical section ends; its release reaches n4 before n2 and n3.
	pOpen := []chan struct{}{pg[2].hold(driver.ScriptRelease), pg[3].hold(driver.ScriptRelease)}
	released := make(chan error, 1)
	go func() { released <- lp.Release(ctx) }()
	<-pg[2].held
	<-pg[3].held
	require.Eventually(t, func() bool { _, _, ok := mem[4].Get("k"); return !ok }, 10*time.Second, time.Millisecond, "P's release on n4")
	// Q's slow calls arrive now.
	for _, ch := range qOpen {
		close(ch)
	}
	r := <-qDone
	for _, ch := range pOpen {
		close(ch)
	}
	<-released
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Logf("Q holds the lock after P, token %d", r.l.Token())
	if r.l.Token() <= lp.Token() {
		t.Errorf("Q's critical section follows P's, but its token %d is not above P's %d", r.l.Token(), lp.Token())
	}
	_ = r.l.Release(ctx)
}
