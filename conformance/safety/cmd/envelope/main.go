// Command envelope measures the safety envelope behind `make chaos`: where
// a Redlock lock stops protecting a resource as one server's clock runs
// fast (libfaketime) and as its holder pauses past the TTL, with and
// without fencing (package conformance/safety's RunEnvelope). It prints a
// Markdown table, violations / trials per cell, bold where theory predicts
// violations, as docs/safety.md shows it:
//
//	cd conformance/safety && go run ./cmd/envelope
//
// It exits 1 if a cell shows violations that theory does not predict
// (inside the drift allowance without a pause, or with fencing), and says
// so, without failing, of a predicted violation the sweep did not show.
//
// Flags:
//
//	-rates list    node 0's clock rates, comma separated (default 1,1.005,1.01,1.02,1.05)
//	-ttl d         lock TTL (default 2s)
//	-trials n      trials per cell (default 10)
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	goredislib "github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/conformance/safety"
	"github.com/quorumlock/quorumlock/core"
)

func main() {
	rates := flag.String("rates", "1,1.005,1.01,1.02,1.05", "node 0's clock rates, comma separated")
	ttl := flag.Duration("ttl", 2*time.Second, "lock TTL")
	trials := flag.Int("trials", 10, "trials per cell")
	flag.Parse()
	log.SetFlags(0)
	cfg := safety.EnvelopeConfig{TTL: *ttl, Trials: *trials, NewNode: newNode,
		Logf: func(format string, args ...any) { log.Printf("envelope: "+format, args...) }}
	for f := range strings.SplitSeq(*rates, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			log.Fatalf("envelope: -rates: %v", err)
		}
		cfg.Rates = append(cfg.Rates, r)
	}
	if _, err := redistest.Binary(); err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	env, err := safety.RunEnvelope(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("TTL %v, drift allowance %v (core's TTL x 1%% + 2 ms): it covers node 0's clock up to x%.4f. %d trials per cell, in %v.\n\n",
		env.TTL, env.Drift, env.Limit, env.Trials, env.Elapsed.Round(time.Second))
	fmt.Print(env.Table())
	unpredicted, missed := env.Surprises()
	for _, c := range missed {
		fmt.Printf("\nenvelope: note: theory predicts violations at %s, and the sweep showed none", c)
	}
	for _, c := range unpredicted {
		fmt.Printf("\nenvelope: VIOLATION that theory does not predict, at %s", c)
	}
	fmt.Println()
	if len(unpredicted) > 0 {
		fmt.Println("envelope: FAIL")
		os.Exit(1)
	}
	fmt.Println("envelope: PASS")
}

func newNode(addr string) (core.Node, func() error, error) {
	c := goredislib.NewClient(goredis.ClientOptions(addr))
	n, err := goredis.New(c)
	return n, c.Close, err
}
