package core

import "github.com/quorumlock/quorumlock/core/driver"

// Node is one independent Redis master, one Redis Cluster, or an in-process
// stand-in, as a backend builds it (backends/goredis, redigo, rueidis,
// valkey, memory). What a backend implements is in package driver.
type Node = driver.Node
