package goredis_test

import (
	"context"
	"fmt"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/core"
)

// Three independent Redis masters, one node each: Dial makes the clients,
// and the Locker's Close closes them. (No Output: it needs the servers.)
func ExampleDial() {
	nodes, closeAll, err := goredis.Dial(
		[]string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"},
		goredis.WithCredentials("", "s3cret"),
		goredis.WithOptions(func(o *redis.Options) { o.PoolSize = 32 }),
	)
	if err != nil {
		log.Fatal(err)
	}
	locker, err := core.New(nodes)
	if err != nil {
		_ = closeAll() // core.New did not take the nodes
		log.Fatal(err)
	}
	defer locker.Close() // releases what is held, closes the nodes and their clients

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

// One Redis Cluster is one node: its masters are not independent voters.
// For Redlock across clusters, Dial each cluster and give all their nodes
// to one Locker.
func ExampleDial_cluster() {
	nodes, closeAll, err := goredis.Dial([]string{"10.0.1.1:7000", "10.0.1.2:7000"}, goredis.WithCluster(true))
	if err != nil {
		log.Fatal(err)
	}
	defer closeAll()
	fmt.Println(nodes[0]) // cluster:10.0.1.1:7000,10.0.1.2:7000
}
