// Httpservice shows middleware/httplock guarding an HTTP route: requests
// for the same account are served one at a time, across every process that
// shares the lock's Redis nodes.
//
//	go run ./examples/httpservice
//
// It starts three in-process Redis servers (miniredis, reached over real
// TCP through go-redis) and an HTTP server on a free loopback port. The
// route "POST /accounts/{id}/withdraw" withdraws money with a non-atomic
// read, pause, write of the balance: two handlers running at once for one
// account lose a withdrawal. The program sends 20 concurrent withdrawals
// for one account three times:
//
//   - to the same handler without the middleware, to show the lost updates
//     (not checked: a race may, rarely, lose nothing);
//   - through httplock with WithWait(5s): each request waits for the
//     account's lock, the handlers run one at a time, and the final
//     balance is exact;
//   - through httplock with WithWait(0): one request goes first and, while
//     its slow withdrawal holds the lock, the 19 others arrive together and
//     are refused at once with 423 Locked and a Retry-After header; the
//     balance is exact for the requests that were served. (Twenty one-shot
//     attempts sent at the very same moment can also split the votes, each
//     node granting a different request, so that none wins a quorum and
//     all twenty are refused: Redlock without retries.)
//
// The lock's key is the {id} path value (httplock.PathValue) with a prefix
// (httplock.WithKeyPrefix), so requests for different accounts never wait
// for each other.
//
// To run it against your own independent Redis masters instead:
//
//	REDIS_ADDRS=10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379 go run ./examples/httpservice
//
// It exits 0 when everything behaved as expected, and 1 otherwise.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/examples/internal/demo"
	"github.com/quorumlock/quorumlock/middleware/httplock"
	"github.com/quorumlock/quorumlock/strategies"
)

// The scenario: requests sent at once, the amount each withdraws, the
// starting balance, and how long a withdrawal pauses between its read and
// its write (longer on the route that does not wait, so that requests meet the lock).
const (
	requests     = 20
	amount       = 10
	startBalance = 1000
	pause        = 5 * time.Millisecond
	slowPause    = 300 * time.Millisecond
	retryAfter   = 2 * time.Second
)

func main() {
	redis.SetLogger(demo.Quiet{}) // a refused dial, for a wrong address: the program reports it itself
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	if err := run(ctx, os.Stdout, demo.ParseAddrs(os.Getenv("REDIS_ADDRS"))); err != nil {
		fmt.Fprintln(os.Stderr, "httpservice: FAILED:", err)
		os.Exit(1)
	}
}

// run is the whole demonstration. With no addrs it starts three embedded
// servers; otherwise it uses the Redis masters at addrs.
func run(ctx context.Context, out io.Writer, addrs []string) error {
	c, err := newCluster(ctx, addrs)
	if err != nil {
		return err
	}
	defer c.close()

	locker, err := core.New(c.nodes,
		core.WithTTL(10*time.Second),
		core.WithNodeTimeout(100*time.Millisecond), // loopback answers in well under 1 ms
		core.WithRetryDelay(strategies.JitterDelay(5*time.Millisecond, 20*time.Millisecond)),
		core.WithTries(1000), // waiting is bounded by httplock.WithWait, not by a count
	)
	if err != nil {
		return err
	}
	defer locker.Close() // runs before c.close: the Locker goes first

	// Each route run gets its own account, so the three runs do not mix.
	b := newBank()
	mux, err := routes(locker, b)
	if err != nil {
		return err
	}
	srv, err := serve(mux)
	if err != nil {
		return err
	}
	defer srv.close()

	fmt.Fprintf(out, "quorumlock httpservice: %s, quorum %d of %d; serving on %s\n",
		c.servers.Where(), locker.Quorum(), len(c.nodes), srv.url)
	fmt.Fprintf(out, "%d concurrent withdrawals of %d from an account holding %d; each reads the balance, pauses, writes it\n",
		requests, amount, startBalance)

	// 1. No lock: handlers overlap and overwrite each other's writes.
	withdrawUnlocked(ctx, out, srv, b)

	// 2. httplock.WithWait: one at a time, nothing lost.
	if err := withdrawWaiting(ctx, out, srv, b); err != nil {
		return err
	}

	// 3. httplock.WithWait(0): the busy ones are refused at once.
	if err := withdrawNow(ctx, out, srv, b); err != nil {
		return err
	}

	fmt.Fprintln(out, "\nhttpservice: all checks passed")
	return nil
}

// routes returns the handler of the three withdrawal routes of bank b: one
// behind httplock with WithWait(5s), one behind httplock with WithWait(0),
// and one with no lock at all.
func routes(locker *core.Locker, b *bank) (http.Handler, error) {
	// The runs' accounts are fresh, but a lock on your servers may not be:
	// a unique prefix keeps this run's keys its own.
	prefix := fmt.Sprintf("httpservice:%d:accounts:", time.Now().UnixNano())
	wait, err := httplock.New(locker, httplock.PathValue("id"), httplock.WithKeyPrefix(prefix),
		httplock.WithWait(5*time.Second))
	if err != nil {
		return nil, err
	}
	noWait, err := httplock.New(locker, httplock.PathValue("id"), httplock.WithKeyPrefix(prefix),
		httplock.WithWait(0), httplock.WithRetryAfter(retryAfter))
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /accounts/{id}/withdraw", wait(b.withdraw(pause)))
	mux.Handle("POST /accounts/{id}/withdraw-now", noWait(b.withdraw(slowPause)))
	mux.Handle("POST /unlocked/accounts/{id}/withdraw", b.withdraw(pause))
	return mux, nil
}

// withdrawUnlocked sends the withdrawals for carol to the route without a
// lock, and reports the withdrawals lost. It checks nothing: a race may,
// rarely, lose none.
func withdrawUnlocked(ctx context.Context, out io.Writer, srv *server, b *bank) {
	fmt.Fprintln(out, "\nPOST /unlocked/accounts/carol/withdraw (no lock):")
	codes, elapsed := srv.burst(ctx, "/unlocked/accounts/carol/withdraw", requests)
	st := b.stats("carol")
	applied := (startBalance - st.balance) / amount
	fmt.Fprintf(out, "  %s in %v; up to %d handlers at once; final balance %d: %d of %d withdrawals lost\n",
		codes, elapsed, st.maxInside, st.balance, requests-applied, requests)
}

// withdrawWaiting sends the withdrawals for alice to the route behind
// httplock.WithWait(5s), and checks that every one was served, one at a
// time, and the balance is exact.
func withdrawWaiting(ctx context.Context, out io.Writer, srv *server, b *bank) error {
	fmt.Fprintln(out, "\nPOST /accounts/alice/withdraw (httplock.WithWait(5s): a request waits for the account's lock):")
	codes, elapsed := srv.burst(ctx, "/accounts/alice/withdraw", requests)
	st := b.stats("alice")
	fmt.Fprintf(out, "  %s in %v; at most %d handler at once; final balance %d\n", codes, elapsed, st.maxInside, st.balance)
	if codes.n[http.StatusOK] != requests {
		return fmt.Errorf("with httplock.WithWait, every request should be served (200 OK), got %s", codes)
	}
	if st.maxInside != 1 {
		return fmt.Errorf("with httplock.WithWait, %d handlers ran at once for one account", st.maxInside)
	}
	if want := startBalance - requests*amount; st.balance != want {
		return fmt.Errorf("with httplock.WithWait, the final balance is %d, want %d", st.balance, want)
	}
	fmt.Fprintf(out, "  exact: %d - %d x %d, served one at a time\n", startBalance, requests, amount)
	return nil
}

// withdrawNow sends the withdrawals for bob to the route behind
// httplock.WithWait(0), and checks that the busy ones were refused at
// once, with Retry-After, and the balance is exact for those served. One
// request goes first and, while its slow withdrawal holds the lock, the
// others arrive together. (Sent all at once, they could also split the
// votes: 20 one-shot rounds over 3 nodes, each node granting whichever came
// first, may leave no one with a quorum, and all 20 are refused.)
func withdrawNow(ctx context.Context, out io.Writer, srv *server, b *bank) error {
	fmt.Fprintf(out, "\nPOST /accounts/bob/withdraw-now (httplock.WithWait(0): a locked account is refused at once):\n")
	codes, elapsed, err := srv.firstThenBurst(ctx, "/accounts/bob/withdraw-now", b.entered("bob"))
	if err != nil {
		return err
	}
	st := b.stats("bob")
	served, busy := codes.n[http.StatusOK], codes.n[http.StatusLocked]
	fmt.Fprintf(out, "  1 request first, holding the lock %v; %d more at once while it does\n", slowPause, requests-1)
	fmt.Fprintf(out, "  %s (Retry-After: %s); the %d answered within %v\n",
		codes, codes.retryAfter, requests-1, elapsed)
	fmt.Fprintf(out, "  at most %d handler at once; final balance %d\n", st.maxInside, st.balance)
	switch {
	case served+busy != requests:
		return fmt.Errorf("with httplock.WithWait(0), want only 200 and 423 answers, got %s", codes)
	case served == 0:
		return errors.New("with httplock.WithWait(0), no request was served")
	case busy == 0:
		return errors.New("with httplock.WithWait(0), no request was refused: they should meet the lock")
	case codes.retryAfter != strconv.Itoa(int(retryAfter/time.Second)):
		return fmt.Errorf("423 answers should carry Retry-After: %d, got %q", int(retryAfter/time.Second), codes.retryAfter)
	case st.maxInside != 1:
		return fmt.Errorf("with httplock.WithWait(0), %d handlers ran at once for one account", st.maxInside)
	case st.balance != startBalance-served*amount:
		return fmt.Errorf("with httplock.WithWait(0), the final balance is %d, want %d", st.balance, startBalance-served*amount)
	}
	fmt.Fprintf(out, "  exact: %d - %d served x %d\n", startBalance, served, amount)
	return nil
}

// bank holds the balances, and counts the handlers running per account to
// catch two at once. Each read and write is safe on its own; a withdrawal,
// read then write, is not atomic: that is what the lock is for.
type bank struct {
	mu        sync.Mutex
	balances  map[string]int
	inside    map[string]int // handlers running now, per account
	maxInside map[string]int // the most ever running at once, per account
	first     map[string]chan struct{}
}

type accountStats struct{ balance, maxInside int }

func newBank() *bank {
	return &bank{balances: map[string]int{}, inside: map[string]int{}, maxInside: map[string]int{}, first: map[string]chan struct{}{}}
}

// entered returns a channel closed when a handler first runs for id.
func (b *bank) entered(id string) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.firstLocked(id)
}

func (b *bank) firstLocked(id string) chan struct{} {
	ch, ok := b.first[id]
	if !ok {
		ch = make(chan struct{})
		b.first[id] = ch
	}
	return ch
}

// withdraw returns the handler of a withdrawal of amount from account
// {id}, which pauses for d between reading and writing the balance.
func (b *bank) withdraw(d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		b.enter(id)
		defer b.leave(id)

		balance := b.read(id)
		time.Sleep(d) // the slow part of the work: another call, a computation
		// Behind httplock, r.Context() is the lock's: it is cancelled if the
		// lock is lost, and then nothing must be written.
		if err := r.Context().Err(); err != nil {
			http.Error(w, "lock lost: "+context.Cause(r.Context()).Error(), http.StatusServiceUnavailable)
			return
		}
		b.write(id, balance-amount)
		fmt.Fprintln(w, "balance", balance-amount)
	})
}

func (b *bank) read(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if v, ok := b.balances[id]; ok {
		return v
	}
	return startBalance
}

func (b *bank) write(id string, v int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.balances[id] = v
}

func (b *bank) enter(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inside[id]++
	if b.maxInside[id] == 0 {
		close(b.firstLocked(id))
	}
	b.maxInside[id] = max(b.maxInside[id], b.inside[id])
}

func (b *bank) leave(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inside[id]--
}

func (b *bank) stats(id string) accountStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	balance, ok := b.balances[id]
	if !ok {
		balance = startBalance
	}
	return accountStats{balance: balance, maxInside: b.maxInside[id]}
}

// server is the HTTP server on a loopback port, and a client for it.
type server struct {
	url    string
	srv    *http.Server
	client *http.Client
}

func serve(h http.Handler) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &server{
		url: "http://" + ln.Addr().String(),
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second},
		client: &http.Client{
			Transport: &http.Transport{MaxIdleConnsPerHost: requests},
			Timeout:   10 * time.Second,
		},
	}
	go func() { _ = s.srv.Serve(ln) }() // returns ErrServerClosed at Shutdown
	return s, nil
}

// close drops the client's idle connections and shuts the server down,
// waiting (boundedly) for requests in flight.
func (s *server) close() {
	s.client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
}

// codes counts the answers of a burst by status code.
type codes struct {
	n          map[int]int
	retryAfter string // the Retry-After header of the busy answers
}

func (c codes) String() string {
	var parts []string
	for _, code := range slices.Sorted(maps.Keys(c.n)) {
		text := http.StatusText(code)
		if code == 0 {
			text = "no answer"
		}
		parts = append(parts, fmt.Sprintf("%d x %d %s", c.n[code], code, text))
	}
	return strings.Join(parts, ", ")
}

// burst sends n POSTs to path at once and counts the answers.
func (s *server) burst(ctx context.Context, path string, n int) (codes, time.Duration) {
	var (
		mu  sync.Mutex
		c   = codes{n: map[int]int{}}
		wg  sync.WaitGroup
		req = make(chan struct{}) // closed to send them all at once
	)
	for range n {
		wg.Go(func() {
			<-req
			code, retry := s.post(ctx, path)
			mu.Lock()
			defer mu.Unlock()
			c.n[code]++
			if code == http.StatusLocked {
				c.retryAfter = retry
			}
		})
	}
	start := time.Now()
	close(req)
	wg.Wait()
	return c, time.Since(start).Round(time.Millisecond)
}

// firstThenBurst sends one POST to path and, once its handler runs
// (entered is closed), requests-1 more at once; it counts all answers and
// times the requests-1.
func (s *server) firstThenBurst(ctx context.Context, path string, entered <-chan struct{}) (codes, time.Duration, error) {
	first := make(chan codes, 1)
	go func() {
		c, _ := s.burst(ctx, path, 1)
		first <- c
	}()
	var c codes
	select {
	case <-entered:
	case c = <-first:
		return c, 0, fmt.Errorf("the first request was not served: %s", c)
	case <-ctx.Done():
		<-first
		return c, 0, ctx.Err()
	}
	c, elapsed := s.burst(ctx, path, requests-1)
	f := <-first
	for code, n := range f.n {
		c.n[code] += n
	}
	if c.retryAfter == "" {
		c.retryAfter = f.retryAfter
	}
	return c, elapsed, nil
}

// post sends one POST and returns its status code (0 when the request
// failed) and Retry-After header.
func (s *server) post(ctx context.Context, path string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+path, nil)
	if err != nil {
		return 0, ""
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// cluster is the set of Redis nodes the lock runs on.
type cluster struct {
	servers *demo.Servers   // embedded, or those of REDIS_ADDRS
	clients []*redis.Client // one per node; the program closes them
	nodes   []core.Node
}

// newCluster starts the embedded servers (when addrs is empty), makes one
// go-redis client and one node per server, and checks that each answers.
func newCluster(ctx context.Context, addrs []string) (*cluster, error) {
	servers, err := demo.Start(addrs, 3)
	if err != nil {
		return nil, err
	}
	c := &cluster{servers: servers}
	fail := func(err error) (*cluster, error) {
		c.close()
		return nil, err
	}
	addrs = servers.Addrs()
	for _, addr := range addrs {
		client := redis.NewClient(goredis.ClientOptions(addr))
		c.clients = append(c.clients, client)
		node, err := goredis.New(client)
		if err != nil {
			return fail(err)
		}
		c.nodes = append(c.nodes, node)
	}
	for i, client := range c.clients {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := client.Ping(pctx).Err()
		cancel()
		if err != nil {
			return fail(fmt.Errorf("no answer to PING from the Redis server at %s: %w", addrs[i], err))
		}
	}
	return c, nil
}

// close closes every client, then every embedded server.
func (c *cluster) close() {
	for _, client := range c.clients {
		_ = client.Close()
	}
	c.servers.Close()
}
