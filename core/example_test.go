package core_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/strategies"
)

// A Locker over three nodes: acquire, use the lock while its validity
// lasts, release.
func Example() {
	ctx := context.Background()
	locker, err := core.New(memory.AsNodes(memory.NewNodes(3)), core.WithTTL(10*time.Second))
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	lock, err := locker.Acquire(ctx, "orders:42")
	if err != nil {
		fmt.Println("not acquired:", err)
		return
	}
	defer lock.Release(ctx)

	fmt.Println("holding", lock.Key(), "quorum", locker.Quorum())
	fmt.Println("safe for more than 9.8s:", lock.Validity() > 9800*time.Millisecond)
	// Output:
	// holding orders:42 quorum 2
	// safe for more than 9.8s: true
}

// TryAcquire makes one round: when the lock is held elsewhere, it fails at
// once with an error matching ErrNotAcquired.
func ExampleLocker_TryAcquire() {
	ctx := context.Background()
	locker, _ := core.New(memory.AsNodes(memory.NewNodes(3)))
	defer locker.Close()

	first, _ := locker.TryAcquire(ctx, "report")
	_, err := locker.TryAcquire(ctx, "report")
	fmt.Println(errors.Is(err, core.ErrNotAcquired))

	_ = first.Release(ctx)
	second, err := locker.TryAcquire(ctx, "report")
	fmt.Println(err == nil, second.Key())
	// Output:
	// true
	// true report
}

// When too many nodes are down, the error is an outage, not contention, and
// the *QuorumError says what each node did.
func ExampleQuorumError() {
	ctx := context.Background()
	nodes := []*memory.Node{
		memory.New(memory.WithName("a")),
		memory.New(memory.WithName("b")),
		memory.New(memory.WithName("c")),
	}
	locker, _ := core.New(memory.AsNodes(nodes))
	defer locker.Close()
	nodes[1].Stop()
	nodes[2].Stop()

	_, err := locker.TryAcquire(ctx, "k")
	fmt.Println("outage:", errors.Is(err, core.ErrUnavailable), "contention:", errors.Is(err, core.ErrNotAcquired))
	var qe *core.QuorumError
	if errors.As(err, &qe) {
		for _, n := range qe.Nodes {
			fmt.Println(n.Node, n.Outcome, n.Err)
		}
	}
	// Output:
	// outage: true contention: false
	// a ok <nil>
	// b failed memory: node is down
	// c failed memory: node is down
}

// Extend renews the lock's TTL on a quorum; its new validity is measured
// from the start of the extending round. A manual clock makes time visible.
func ExampleLock_Extend() {
	ctx := context.Background()
	clock := memory.NewManualClock(time.Unix(0, 0))
	locker, _ := core.New(memory.AsNodes(memory.NewNodes(3, memory.WithClock(clock))),
		core.WithClock(clock), core.WithTTL(10*time.Second))
	defer locker.Close()

	lock, _ := locker.Acquire(ctx, "job")
	clock.Advance(8 * time.Second)
	fmt.Println("before:", lock.Validity())
	if err := lock.Extend(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("after:", lock.Validity())
	// Output:
	// before: 1.898s
	// after: 9.898s
}

// Acquire waits for the holder, retrying with a jittered delay, until the
// context ends; a cancelled wait matches both the context error and the
// lock error.
func ExampleLocker_Acquire_deadline() {
	locker, _ := core.New(memory.AsNodes(memory.NewNodes(3)),
		core.WithRetryDelay(strategies.JitterDelay(5*time.Millisecond, 10*time.Millisecond)))
	defer locker.Close()
	held, _ := locker.TryAcquire(context.Background(), "k")
	defer held.Release(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := locker.Acquire(ctx, "k")
	fmt.Println(errors.Is(err, context.DeadlineExceeded), errors.Is(err, core.ErrNotAcquired))
	// Output:
	// true true
}

// Strategies change how a round asks the nodes, never the result's safety.
func ExampleWithStrategy() {
	locker, _ := core.New(memory.AsNodes(memory.NewNodes(5)),
		core.WithStrategy(strategies.FailFast(strategies.WithStopAtQuorum(true))))
	defer locker.Close()
	fmt.Println(locker.Quorum())
	// Output:
	// 3
}

// Do runs a function under the lock, keeps the lock alive however long
// the function takes, and releases it afterwards. The function's context
// ends if the lock is lost, with the reason as its cause.
func ExampleLocker_Do() {
	ctx := context.Background()
	locker, _ := core.New(memory.AsNodes(memory.NewNodes(3)), core.WithTTL(300*time.Millisecond))
	defer locker.Close()

	err := locker.Do(ctx, "nightly-report", func(ctx context.Context) error {
		select {
		case <-time.After(time.Second): // more than three TTLs of work
			fmt.Println("work done, lock still held")
			return nil
		case <-ctx.Done():
			return context.Cause(ctx) // the lock was lost: stop
		}
	})
	fmt.Println("err:", err)
	// Output:
	// work done, lock still held
	// err: <nil>
}

// Done and Err tell a holder when its lock stops being safe to use.
func ExampleLock_Done() {
	ctx := context.Background()
	nodes := memory.NewNodes(3)
	locker, _ := core.New(memory.AsNodes(nodes), core.WithTTL(time.Second))
	defer locker.Close()

	lock, _ := locker.Acquire(ctx, "job")
	_ = lock.KeepAlive()
	for _, n := range nodes[:2] { // someone deletes the lock behind our back
		n.Del("job")
	}
	<-lock.Done() // at the next extension, a third of the TTL later
	fmt.Println(errors.Is(lock.Err(), core.ErrLockLost))
	// Output:
	// true
}

// With fencing on, every acquisition of a key gets a larger token, which a
// storage layer can use to refuse writes from a holder that lost the lock
// without knowing it.
func ExampleLock_Token() {
	ctx := context.Background()
	locker, _ := core.New(memory.AsNodes(memory.NewNodes(3)), core.WithFencing(true))
	defer locker.Close()

	for range 3 {
		lock, _ := locker.Acquire(ctx, "ledger")
		fmt.Println("token", lock.Token())
		_ = lock.Release(ctx)
	}
	// Output:
	// token 1
	// token 2
	// token 3
}

// The restart guard keeps a node that restarted empty from voting for a
// max TTL; Adopt declares nodes known to hold no lock, such as the servers
// of a first deployment.
func ExampleLocker_Adopt() {
	ctx := context.Background()
	nodes := memory.NewNodes(3)
	locker, _ := core.New(memory.AsNodes(nodes), core.WithTries(1), core.WithQuorum(3))
	defer locker.Close()

	nodes[2].Stop()
	nodes[2].Start() // back without its data: young to the guard
	_, err := locker.TryAcquire(ctx, "job")
	fmt.Println(errors.Is(err, core.ErrNodeRestarted))

	if err := locker.Adopt(ctx, nodes[2].String()); err != nil {
		fmt.Println(err)
		return
	}
	lock, err := locker.TryAcquire(ctx, "job")
	fmt.Println(err)
	_ = lock.Release(ctx)
	// Output:
	// true
	// <nil>
}

// Inspect reads what each node holds under a key, without taking it: who
// holds it, on how many nodes, and for how long.
func ExampleLocker_Inspect() {
	ctx := context.Background()
	locker, _ := core.New(memory.AsNodes(memory.NewNodes(3)), core.WithTTL(10*time.Second))
	defer locker.Close()

	st, _ := locker.Inspect(ctx, "report")
	fmt.Println("held:", st.Held())

	lock, _ := locker.Acquire(ctx, "report")
	defer lock.Release(ctx)
	st, _ = locker.Inspect(ctx, "report")
	value, nodes, ttl := st.Holder()
	fmt.Println("held:", st.Held(), "on", nodes, "of", len(st.Nodes), "nodes")
	fmt.Println("by this lock:", value == lock.Value(), "for more than 9s:", ttl > 9*time.Second)
	// Output:
	// held: false
	// held: true on 3 of 3 nodes
	// by this lock: true for more than 9s: true
}

// AcquireAll holds several keys at once, all or none: a lock on any one of
// them is refused while the set holds.
func ExampleLocker_AcquireAll() {
	ctx := context.Background()
	locker, _ := core.New(memory.AsNodes(memory.NewNodes(3)))
	defer locker.Close()

	both, err := locker.AcquireAll(ctx, "{acct}:bob", "{acct}:alice")
	if err != nil {
		panic(err)
	}
	fmt.Println(both.Key(), both.Keys())
	_, err = locker.TryAcquire(ctx, "{acct}:bob")
	fmt.Println(errors.Is(err, core.ErrNotAcquired))
	_ = both.Release(ctx)
	// Output:
	// {acct}:alice,{acct}:bob [{acct}:alice {acct}:bob]
	// true
}

// Shared locks hold a key together; a writer (the plain lock) waits until
// the last of them is released.
func ExampleLocker_AcquireShared() {
	ctx := context.Background()
	locker, _ := core.New(memory.AsNodes(memory.NewNodes(3)))
	defer locker.Close()

	r1, _ := locker.AcquireShared(ctx, "config")
	r2, err := locker.TryAcquireShared(ctx, "config")
	fmt.Println("second reader:", err == nil, r2.Shared())
	_, err = locker.TryAcquire(ctx, "config")
	fmt.Println("writer refused:", errors.Is(err, core.ErrNotAcquired))

	_ = r1.Release(ctx)
	_ = r2.Release(ctx)
	w, err := locker.TryAcquire(ctx, "config")
	fmt.Println("writer after the readers:", err == nil)
	_ = w.Release(ctx)
	// Output:
	// second reader: true true
	// writer refused: true
	// writer after the readers: true
}

// A semaphore of two permits: two holders at once, the third refused
// until one releases. Each permit is a Lock like any other.
func ExampleLocker_AcquirePermit() {
	ctx := context.Background()
	locker, err := core.New(memory.AsNodes(memory.NewNodes(3)))
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	a, err := locker.AcquirePermit(ctx, "encoders", 2)
	if err != nil {
		panic(err)
	}
	b, err := locker.AcquirePermit(ctx, "encoders", 2)
	if err != nil {
		panic(err)
	}
	_, err = locker.TryAcquirePermit(ctx, "encoders", 2)
	fmt.Println("third:", errors.Is(err, core.ErrNotAcquired))

	_ = a.Release(ctx)
	c, err := locker.TryAcquirePermit(ctx, "encoders", 2)
	fmt.Println("after a release:", err, c.Key())
	_ = b.Release(ctx)
	_ = c.Release(ctx)
	// Output:
	// third: true
	// after a release: <nil> encoders
}
