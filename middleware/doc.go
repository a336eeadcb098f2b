// Package middleware holds what plugs quorumlock into the rest of a
// service, each in a package of its own so that an application pulls in
// only the dependencies it uses (metrics and tracing are Go modules of
// their own as well, so that the library's module requires neither
// Prometheus nor OpenTelemetry):
//
//   - logging: a core.Observer that logs acquisitions, extensions,
//     releases and losses with log/slog;
//   - metrics: a core.Observer that keeps Prometheus metrics;
//   - tracing: a core.Observer that records OpenTelemetry spans;
//   - httplock: net/http middleware that runs a handler under a lock whose
//     key comes from the request.
//
// Observers are added to a Locker with core.WithObserver (several may be);
// a Locker without one pays nothing for them.
package middleware
