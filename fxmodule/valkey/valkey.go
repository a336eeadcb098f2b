// Package valkey links the valkey driver (github.com/valkey-io/valkey-go)
// into fxmodule: a program whose Config.Driver is "valkey" imports it:
//
//	import _ "github.com/quorumlock/quorumlock/fxmodule/valkey"
package valkey

import (
	qlvalkey "github.com/quorumlock/quorumlock/backends/valkey"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/fxmodule"
	"github.com/quorumlock/quorumlock/fxmodule/internal/drivers"
)

func init() {
	drivers.Register(fxmodule.DriverValkey, func(s drivers.Settings) ([]core.Node, error) {
		nodes, _, err := qlvalkey.Dial(s.Addrs, qlvalkey.WithCredentials(s.Username, s.Password),
			qlvalkey.WithTLS(s.TLS), qlvalkey.WithTLSConfig(s.TLSConfig), qlvalkey.WithCluster(s.Cluster))
		return nodes, err
	})
}
