// Package redigo links the redigo driver (github.com/gomodule/redigo)
// into fxmodule: a program whose Config.Driver is "redigo" imports it:
//
//	import _ "github.com/quorumlock/quorumlock/fxmodule/redigo"
package redigo

import (
	"github.com/quorumlock/quorumlock/backends/redigo"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/fxmodule"
	"github.com/quorumlock/quorumlock/fxmodule/internal/drivers"
)

func init() {
	drivers.Register(fxmodule.DriverRedigo, func(s drivers.Settings) ([]core.Node, error) {
		// Config.Validate refuses Cluster with redigo.
		nodes, _, err := redigo.Dial(s.Addrs, redigo.WithCredentials(s.Username, s.Password),
			redigo.WithTLS(s.TLS), redigo.WithTLSConfig(s.TLSConfig))
		return nodes, err
	})
}
