// Package faultproxy is a fault-injecting TCP proxy for tests: it sits in
// front of one real server (a redis-server of package redistest) on its
// own loopback port, and a test adds network faults to that one node while
// its clients keep the proxy's address.
//
//	p, err := faultproxy.Start(server.Addr())
//	...
//	defer p.Close()
//	client := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
//	p.SetLatency(80*time.Millisecond, 0) // every round trip about 80 ms longer
//	p.Partition()                        // requests hang until their deadline
//	p.Heal()                             // back to normal
//
// # Faults
//
// SetLatency delays what the server sends back: each chunk of reply bytes
// is held until latency ± jitter after the proxy read it, in order, so a
// request-reply round trip takes about latency longer. Requests reach the
// server at once, so the server acts on a command before its client hears
// back, as on a slow return path.
//
// Partition black-holes the node. Connections stay open and new ones are
// accepted (the handshake is the proxy's own), but no byte passes either
// way: bytes read meanwhile, in both directions, are dropped, not held, and
// a FIN is swallowed. A client waiting for a reply waits for its own
// deadline, as behind a dead link. Dropped bytes leave holes in the
// streams, so Heal resets (TCP RST) every connection that lost bytes during
// the partition; connections that stayed idle survive it. A request sent
// during a partition is therefore never executed later.
//
// Reset closes every open connection with a TCP RST, on both sides, as a
// crashed peer would; the next connection works.
//
// Refuse stops the proxy's socket listening, so new connections are
// refused (ECONNREFUSED at dial, as with a node whose port is closed), and
// resets the open ones. The socket keeps its port meanwhile (the kernel
// gives it to no port-0 bind nor outgoing connection), and Heal listens
// again on the same address.
//
// Heal removes every fault at once: when it returns, new bytes pass
// undelayed, replies held by latency are sent, and connections are
// accepted again.
//
// Faults combine: a partitioned node can also refuse, and latency stays set
// across Partition. Close stops the proxy and returns only when every
// goroutine it started has ended. The package needs Linux, as redistest
// does (Refuse relies on Linux's shutdown of a listening socket).
//
// # Clients behind the proxy
//
// A new go-redis connection pays the latency on each round trip of its
// handshake (HELLO and CLIENT SETINFO): with go-redis v9.23 the first PING
// of a new client takes about four times the latency. After Refuse,
// a go-redis client whose dials have failed PoolSize times answers with the
// last dial error without dialing, until a probe it runs once a second
// gets through: after Heal it may keep failing for up to a second, while a
// new client connects at once. That probe also outlives the client's Close
// by up to a second, which a goleak check must allow for (redistest.Main
// does).
//
// # Why not toxiproxy
//
// github.com/Shopify/toxiproxy/v2 (v2.5.0) was tried in-process first and
// left out. Removing its timeout toxic (the only way to black-hole) while a
// client writes can leave a link's goroutines blocked forever on a channel
// send, a leak that goleak sees and its Stop does not clear; its Stop does
// not wait for connection goroutines, so Close could not promise they have
// ended; it has no public way to close connections except Stop, which gives
// up the port; and it sends RST only on connections that had a reset_peer
// toxic when they were opened.
package faultproxy
