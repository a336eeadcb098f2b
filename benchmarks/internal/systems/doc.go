// Package systems adapts quorumlock and its peers to one small interface,
// so that the measurements of lockbench treat them alike.
//
// A System is a named contestant: quorumlock over each of its three drivers
// with each strategy, redsync over the same three drivers, rueidislock,
// bsm/redislock, and two floors that speak the Redlock protocol directly
// through a driver, without any lock library. System.Open makes a fresh
// Instance over a list of redis-server addresses: its own clients, one per
// server, which Instance.Close closes again.
//
// Every system uses the driver settings of quorumlock's backend helpers
// (goredis.ClientOptions, redigo.NewPool, rueidis.ClientOption), so that
// the comparison is between lock libraries rather than client settings. The
// two exceptions are rueidislock, which builds its own client and needs
// rueidis's client-side caching to learn of releases, and so gets rueidis's
// defaults, and bsm/redislock, which shares go-redis's settings.
//
// System.OpenFor opens a system for a healthy or a degraded mode: the same
// Instance, except that the floors bound each call to a node by
// NodeTimeout in the degraded modes, as quorumlock bounds its own.
package systems
