// Package goredis links the goredis driver (github.com/redis/go-redis/v9)
// into fxmodule: a program whose Config.Driver is "goredis" imports it,
// blank if it needs nothing else from it:
//
//	import _ "github.com/quorumlock/quorumlock/fxmodule/goredis"
//
// Node contributes a node over the app's own go-redis client.
package goredis

import (
	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"github.com/quorumlock/quorumlock/backends/goredis"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/fxmodule"
	"github.com/quorumlock/quorumlock/fxmodule/internal/drivers"
)

func init() {
	drivers.Register(fxmodule.DriverGoRedis, func(s drivers.Settings) ([]core.Node, error) {
		// WithTLSConfig turns TLS on when given a configuration, and a nil
		// one changes nothing, as Config.TLSConfig means.
		nodes, _, err := goredis.Dial(s.Addrs, goredis.WithCredentials(s.Username, s.Password),
			goredis.WithTLS(s.TLS), goredis.WithTLSConfig(s.TLSConfig), goredis.WithCluster(s.Cluster))
		return nodes, err
	})
}

// Node contributes to fxmodule.NodesGroup a node over the app's
// redis.UniversalClient (go-redis), built by the goredis backend's New
// with opts. The client stays the app's: the module never closes it. Its
// options must have ContextTimeoutEnabled (see the backend's New).
func Node(opts ...goredis.Option) fx.Option {
	return fxmodule.Node(func(client redis.UniversalClient) (*goredis.Node, error) { return goredis.New(client, opts...) })
}
