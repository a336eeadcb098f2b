package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/benchmarks/internal/report"
	"github.com/quorumlock/quorumlock/conformance/redistest"
)

// restoreTimeout bounds bringing the herald back after a degraded
// measurement, until it answers.
const restoreTimeout = 30 * time.Second

// heraldOf returns the index in addrs of the herald of a Locker over one
// node per address: quorumlock orders its nodes by name (String), and a
// node over one server is named by the server's address, so the herald is
// the address that sorts first as a string ("127.0.0.1:10000" before
// "127.0.0.1:9999"). The other systems have no herald; the degraded modes
// fail the same server for them.
func heraldOf(addrs []string) int {
	return slices.Index(addrs, slices.Min(addrs))
}

// inject makes srv fail as fault says: hung (SIGSTOP: it keeps its
// connections and answers nothing) or dead (shut down: connections are
// refused).
func inject(fault string, srv *redistest.Server) error {
	switch fault {
	case report.Hung:
		return srv.Pause()
	case report.Dead:
		return srv.Stop()
	}
	return fmt.Errorf("unknown fault %q", fault)
}

// restore undoes inject and waits until srv answers again: a hung server
// is resumed (SIGCONT) and must answer PING; a dead one is restarted on
// its port (Restart waits until it answers) and adopted for quorumlock's
// restart guard, as redistest.StartServer adopts a new server: it comes
// back empty, and without its birth key the guard of later measurements
// would take it for a server that restarted under their locks. The
// caller's context does not cut it short: an interrupted run still leaves
// its servers whole.
func restore(ctx context.Context, fault string, srv *redistest.Server) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restoreTimeout)
	defer cancel()
	switch fault {
	case report.Hung:
		if err := srv.Resume(); err != nil {
			return err
		}
	case report.Dead:
		if err := srv.Restart(ctx); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown fault %q", fault)
	}
	if fault == report.Dead {
		return srv.Adopt(ctx)
	}
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("%s does not answer after SIGCONT: %w", srv.Addr(), err)
	}
	return nil
}
