package metrics_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/middleware/metrics"
)

// An Observer registered on a registry that a /metrics handler serves,
// counting a Locker's operations.
func Example() {
	obs, err := metrics.New()
	if err != nil {
		fmt.Println(err)
		return
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(obs) // New registers nothing itself
	handler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})

	locker, err := core.New(memory.AsNodes(memory.NewNodes(1)), core.WithObserver(obs))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()
	ctx := context.Background()
	lock, err := locker.Acquire(ctx, "invoice:7")
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = locker.TryAcquire(ctx, "invoice:7") // held: contended
	fmt.Println("second try:", core.Reason(err))
	_ = lock.Release(ctx)

	// Scrape, and show the counters (durations change from run to run).
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	lines := bufio.NewScanner(rec.Body)
	for lines.Scan() {
		if line := lines.Text(); strings.HasPrefix(line, "quorumlock_operations_total") || strings.HasPrefix(line, "quorumlock_locks_held") {
			fmt.Println(line)
		}
	}
	// Output:
	// second try: contended
	// quorumlock_locks_held{lock="mutex"} 0
	// quorumlock_operations_total{lock="mutex",op="acquire",outcome="contended"} 1
	// quorumlock_operations_total{lock="mutex",op="acquire",outcome="ok"} 1
	// quorumlock_operations_total{lock="mutex",op="release",outcome="ok"} 1
}
