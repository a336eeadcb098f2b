package main

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/benchmarks/internal/report"
	"github.com/quorumlock/quorumlock/benchmarks/internal/systems"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core/driver"
)

func TestHeraldOf(t *testing.T) {
	// By string, not by port number.
	addrs := []string{"127.0.0.1:9999", "127.0.0.1:40000", "127.0.0.1:10000"}
	if i := heraldOf(addrs); i != 2 {
		t.Errorf("herald %d (%s), want 2 (127.0.0.1:10000)", i, addrs[i])
	}
}

func system(t *testing.T, name string) systems.System {
	t.Helper()
	for _, s := range systems.All() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no system %s", name)
	return systems.System{}
}

// TestDegradedModes runs one short measurement of each kind of degraded
// mode against real servers, and checks that it is sound and leaves every
// server healthy, the restarted herald adopted again.
func TestDegradedModes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-servers")
	}
	redistest.RequireServer(t)
	redistest.QuietRedisLogs() // dial failures of the dead herald
	ctx := context.Background()
	servers, err := startServers(ctx, report.DegradedMinNodes)
	t.Cleanup(func() {
		for _, s := range servers {
			_ = s.Close()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr()
	}
	herald := servers[heraldOf(addrs)]
	for i, c := range []struct{ sys, mode string }{
		{"quorumlock-rueidis-parallel", report.HungUncontended},
		{"quorumlock-goredis-parallel", report.DeadContended},
		{"floor-goredis", report.DeadUncontended},
	} {
		rec, rerr := measureOne(ctx, system(t, c.sys), c.mode, addrs, herald, 100*time.Millisecond, "lockbench-test:"+c.mode+":")
		rec.Run, rec.Nodes = 1, len(addrs)
		if rerr != nil {
			t.Fatalf("%s %s: %v", c.mode, c.sys, rerr)
		}
		if rec.Error != "" || rec.CloseError != "" || rec.LeakedGoroutines > 0 {
			t.Errorf("%s %s: error %q, close error %q, %d goroutines leaked", c.mode, c.sys, rec.Error, rec.CloseError, rec.LeakedGoroutines)
		}
		if bad := unsound([]report.Record{rec}); len(bad) > 0 {
			t.Errorf("unsound: %q", bad)
		}
		switch {
		case report.Contended(c.mode) && (rec.Contention == nil || rec.Contention.Acquisitions == 0):
			t.Errorf("%s %s: no acquisitions: %s", c.mode, c.sys, progress(rec))
		case !report.Contended(c.mode) && (rec.Throughput == nil || rec.Throughput.Ops == 0 || rec.Throughput.OpTimeout == 0):
			t.Errorf("%s %s: no bounded operations: %s", c.mode, c.sys, progress(rec))
		}
		for _, s := range servers {
			cl := goredis.NewClient(&goredis.Options{Addr: s.Addr()})
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			birth, err := cl.Get(pctx, driver.BirthKey).Result()
			cancel()
			_ = cl.Close()
			if err != nil || birth != "0" {
				t.Errorf("after %s %s, %s: birth key %q, %v; want 0", c.mode, c.sys, s.Addr(), birth, err)
			}
		}
		if t.Failed() {
			t.Logf("measurement %d: %s", i, progress(rec))
		}
	}
}
