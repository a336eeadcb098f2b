package rueidis_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/rueidis"

	qlrueidis "github.com/quorumlock/quorumlock/backends/rueidis"
	"github.com/quorumlock/quorumlock/core"
)

// Three independent Redis masters, one node each: Dial makes the clients
// in parallel, without waiting for a server that is hung, and the Locker's
// Close closes them. (No Output: it needs the servers.)
func ExampleDial() {
	nodes, closeAll, err := qlrueidis.Dial(
		[]string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"},
		qlrueidis.WithCredentials("", "s3cret"),
		qlrueidis.WithClientOption(func(o *rueidis.ClientOption) { o.ClientName = "orders" }),
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
// A cluster client needs a seed that answers, so give it time to connect.
func ExampleDial_cluster() {
	nodes, closeAll, err := qlrueidis.Dial([]string{"10.0.1.1:7000", "10.0.1.2:7000"},
		qlrueidis.WithCluster(true), qlrueidis.WithConnectWait(2*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer closeAll()
	fmt.Println(nodes[0]) // cluster:10.0.1.1:7000,10.0.1.2:7000
}
