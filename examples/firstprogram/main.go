package main

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/middleware/logging"
)

func main() {
	// Three independent Redis masters: not replicas of each other.
	nodes, closeNodes, err := goredis.Dial([]string{"localhost:6379", "localhost:6380", "localhost:6381"})
	if err != nil {
		log.Fatal(err)
	}
	// The observer logs failures and waits (through slog) as they happen.
	locker, err := core.New(nodes, core.WithObserver(logging.New(slog.Default())))
	if err != nil {
		_ = closeNodes()
		log.Fatal(err)
	}
	defer locker.Close() // releases what is still held, then closes the clients

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lock, err := locker.Acquire(ctx, "orders:42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("acquired %q, valid for %v\n", lock.Key(), lock.Validity().Truncate(100*time.Millisecond))

	// ... the work the lock protects; it is safe while lock.Validity() > 0.

	if err := lock.Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released")
}
