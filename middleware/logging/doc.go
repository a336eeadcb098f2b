// Package logging logs what a quorumlock Locker does with log/slog: an
// Observer (core.Observer) to add with core.WithObserver.
//
//	locker, err := core.New(nodes, core.WithObserver(logging.New(slog.Default())))
//
// Each acquisition, extension, release and loss becomes one record with
// the message "quorumlock <op>" and the attributes key, lock (the kind of
// lock: mutex, multi or shared), outcome (core.Reason of the error),
// duration, and where they apply tries, token,
// validity and error; failed operations also carry one attribute per node
// (its outcome, latency and error) under "nodes". Levels are chosen by
// outcome (see the options); records below the handler's level cost only
// the check.
package logging
