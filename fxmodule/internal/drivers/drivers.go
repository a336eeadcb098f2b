// Package drivers holds the dialers that fxmodule's driver packages
// (fxmodule/goredis, fxmodule/redigo, fxmodule/rueidis, fxmodule/valkey)
// register when a program imports them, so that fxmodule itself imports no
// Redis client and a program links, and its go.mod lists, only the drivers
// it imports.
package drivers

import (
	"crypto/tls"
	"sync"

	"github.com/quorumlock/quorumlock/core"
)

// Settings are the Config fields a Dial uses.
type Settings struct {
	Addrs              []string
	Username, Password string
	TLS                bool
	TLSConfig          *tls.Config
	Cluster            bool
}

// Dial makes one node per address, each owning its client; on error it has
// closed what it made.
type Dial func(Settings) ([]core.Node, error)

var (
	mu    sync.RWMutex
	dials = map[string]Dial{}
)

// Register makes name dial with d. A driver package calls it from init.
func Register(name string, d Dial) {
	mu.Lock()
	defer mu.Unlock()
	dials[name] = d
}

// Lookup returns the Dial registered for name, and false when no imported
// package registered it.
func Lookup(name string) (Dial, bool) {
	mu.RLock()
	defer mu.RUnlock()
	d, ok := dials[name]
	return d, ok
}
