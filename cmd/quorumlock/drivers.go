package main

// The command dials with any driver --driver or QUORUMLOCK_DRIVER names,
// so it links every one of fxmodule's driver packages.
import (
	_ "github.com/quorumlock/quorumlock/fxmodule/goredis"
	_ "github.com/quorumlock/quorumlock/fxmodule/redigo"
	_ "github.com/quorumlock/quorumlock/fxmodule/rueidis"
	_ "github.com/quorumlock/quorumlock/fxmodule/valkey"
)
