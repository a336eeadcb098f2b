package valkey_test

import (
	"context"
	"fmt"
	"log"

	"github.com/valkey-io/valkey-go"

	qlvalkey "github.com/quorumlock/quorumlock/backends/valkey"
	"github.com/quorumlock/quorumlock/core"
)

// Three independent masters, one node each: Dial makes the clients in
// parallel, without waiting for a server that is hung, and the Locker's
// Close closes them. (No Output: it needs the servers.)
func ExampleDial() {
	nodes, closeAll, err := qlvalkey.Dial(
		[]string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"},
		qlvalkey.WithCredentials("", "s3cret"),
		qlvalkey.WithClientOption(func(o *valkey.ClientOption) { o.ClientName = "orders" }),
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

// A node over a client of your own, which stays yours to close.
func ExampleNew() {
	client, err := valkey.NewClient(qlvalkey.ClientOption("127.0.0.1:6379"))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	node, err := qlvalkey.New(client)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(node) // 127.0.0.1:6379
}

// The options show as written, for logs.
func Example_options() {
	fmt.Println(qlvalkey.WithCluster(true), qlvalkey.WithTLSConfig(nil), qlvalkey.WithName("a"))
	// Output: WithCluster(true) WithTLSConfig(nil) WithName("a")
}
