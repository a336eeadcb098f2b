// Package rueidis links the rueidis driver (github.com/redis/rueidis) into
// fxmodule: a program whose Config.Driver is "rueidis", or empty (the
// default driver), imports it, blank if it needs nothing else from it:
//
//	import _ "github.com/quorumlock/quorumlock/fxmodule/rueidis"
//
// Node contributes a node over the app's own rueidis client.
package rueidis

import (
	"github.com/redis/rueidis"
	"go.uber.org/fx"

	qlrueidis "github.com/quorumlock/quorumlock/backends/rueidis"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/fxmodule"
	"github.com/quorumlock/quorumlock/fxmodule/internal/drivers"
)

func init() {
	drivers.Register(fxmodule.DriverRueidis, func(s drivers.Settings) ([]core.Node, error) {
		nodes, _, err := qlrueidis.Dial(s.Addrs, qlrueidis.WithCredentials(s.Username, s.Password),
			qlrueidis.WithTLS(s.TLS), qlrueidis.WithTLSConfig(s.TLSConfig), qlrueidis.WithCluster(s.Cluster))
		return nodes, err
	})
}

// Node contributes to fxmodule.NodesGroup a node over the app's
// rueidis.Client, built by the rueidis backend's New with opts. The client
// stays the app's (unless opts hold WithCloseClient(true)). Build the
// client from the backend's ClientOption for the settings a lock node
// needs.
func Node(opts ...qlrueidis.Option) fx.Option {
	return fxmodule.Node(func(client rueidis.Client) (*qlrueidis.Node, error) { return qlrueidis.New(client, opts...) })
}
