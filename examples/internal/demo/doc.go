// Package demo holds what the example programs of examples/ share: the
// REDIS_ADDRS parsing (ParseAddrs), the servers a program runs on (Start:
// embedded miniredis servers when no address is given, else the given
// Redis masters; Servers.Where says which, for the program's header),
// Plural for the narration, and Quiet, a go-redis logger that drops
// go-redis's own log lines.
//
// Each program keeps what it shows: its clients, its nodes and its Locker
// are built in its own main.go. Package demotest holds the helpers of the
// programs' tests.
package demo
