package memory_test

import (
	"context"
	"fmt"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
)

// Three in-process nodes, one of them down: two of three are a quorum, so
// the lock is granted, and held on the two nodes that are up.
func ExampleNew() {
	ctx := context.Background()
	nodes := []*memory.Node{
		memory.New(memory.WithName("a")),
		memory.New(memory.WithName("b")),
		memory.New(memory.WithName("c")),
	}
	locker, err := core.New(memory.AsNodes(nodes))
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	nodes[2].Stop() // as a Redis server that is down
	lock, err := locker.Acquire(ctx, "orders:42")
	if err != nil {
		fmt.Println("not acquired:", err)
		return
	}
	for _, n := range nodes {
		_, _, held := n.Get("orders:42")
		fmt.Println(n, "holds orders:42:", held)
	}

	nodes[2].Start() // back, empty
	err = lock.Release(ctx)
	_, _, held := nodes[0].Get("orders:42")
	fmt.Println("released:", err == nil, "held on a:", held)
	// Output:
	// a holds orders:42: true
	// b holds orders:42: true
	// c holds orders:42: false
	// released: true held on a: false
}
