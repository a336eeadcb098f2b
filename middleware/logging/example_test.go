package logging_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/middleware/logging"
)

// A Locker that logs its operations: successes at Debug, failures at Warn,
// lost locks at Error.
func Example() {
	handler := slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		// Leave out what changes from run to run.
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			switch a.Key {
			case slog.TimeKey, "duration", "validity":
				return slog.Attr{}
			}
			return a
		},
	})
	locker, err := core.New(memory.AsNodes(memory.NewNodes(1)), core.WithObserver(logging.New(slog.New(handler))))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()

	lock, err := locker.Acquire(context.Background(), "invoice:7")
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = lock.Release(context.Background())
	// Output:
	// level=DEBUG msg="quorumlock acquire" key=invoice:7 lock=mutex outcome=ok tries=1
	// level=DEBUG msg="quorumlock release" key=invoice:7 lock=mutex outcome=ok
}
