// Package driver is the contract between the lock protocol (package core)
// and a Redis driver: what a backend implements (Node and the optional
// Batcher, Watcher and Sharded), what the protocol sends (the Scripts, the
// key and channel names), and the helpers every backend shares (address
// checks, batch fallbacks, resubscription pacing, error explanations).
//
// Users import core and a backend; only backends import driver. A backend
// written outside this module has the same tools as the ones inside it, and
// proves itself with the exported conformance suite (package conformance).
// As database/sql/driver does for database/sql, this package holds no
// protocol logic: quorums, validity and retries are core's.
package driver
