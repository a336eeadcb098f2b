package redigo_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/quorumlock/quorumlock/backends/redigo"
	"github.com/quorumlock/quorumlock/core"
)

// Three independent Redis masters, one node each: Dial makes the pools,
// and the Locker's Close closes them. (No Output: it needs the servers.)
func ExampleDial() {
	nodes, closeAll, err := redigo.Dial(
		[]string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"},
		redigo.WithCredentials("", "s3cret"),
		redigo.WithDialOptions(redis.DialClientName("orders")),
		redigo.WithPool(func(p *redis.Pool) { p.IdleTimeout = time.Minute }),
	)
	if err != nil {
		log.Fatal(err)
	}
	locker, err := core.New(nodes)
	if err != nil {
		_ = closeAll() // core.New did not take the nodes
		log.Fatal(err)
	}
	defer locker.Close() // releases what is held, closes the nodes and their pools

	ctx := context.Background()
	lock, err := locker.Acquire(ctx, "orders:42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("holding", lock.Key())
	if err := lock.Release(ctx); err != nil {
		log.Print(err)
	}
}
