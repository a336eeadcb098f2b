// Command quorumlock runs a command under a distributed lock, as flock(1)
// does on one machine: across a fleet, over independent Redis masters
// (Redlock) or a Redis Cluster.
//
//	quorumlock run [flags] KEY -- COMMAND [ARGS...]
//	quorumlock run [flags] KEY [KEY...] -- COMMAND [ARGS...]
//	quorumlock run --shared [flags] KEY -- COMMAND [ARGS...]
//	quorumlock run -n K [flags] KEY -- COMMAND [ARGS...]
//	quorumlock elect [flags] KEY -- COMMAND [ARGS...]
//	quorumlock status [flags] KEY
//	quorumlock status -n K [flags] KEY
//
// run acquires KEY (every KEY, or none; with --shared, a read lock that
// other --shared runs share and a plain run waits for; with -n K, one of
// K permits), runs COMMAND in its own process group while keeping the
// lock alive, releases the lock once no process of that group is left
// (COMMAND's background processes hold the lock too) and exits with
// COMMAND's status. If the lock is lost, or at risk of being lost, while
// COMMAND runs, COMMAND is stopped (SIGTERM to its process group, then
// SIGKILL before the lock's validity ends) and run exits with status 79.
// elect campaigns for the leadership of KEY, runs COMMAND while it leads,
// as run does under a lock, and resigns when COMMAND's group is gone; with
// --again it stands again, until a signal.
// status reports whether KEY is held, on how many nodes, and for how long,
// a shared lock's readers, an election's leader, or with -n K the permits
// in use.
//
// Every flag can also be given in the environment, under the names of
// fxmodule's configuration (QUORUMLOCK_ADDRS, QUORUMLOCK_DRIVER,
// QUORUMLOCK_TTL...); a flag wins over its variable. `quorumlock help`
// lists the flags and the exit statuses; docs/cli.md says why they are
// what they are.
package main

import (
	"fmt"
	"io"
	"os"
)

// Exit statuses of quorumlock itself; run otherwise exits with COMMAND's.
const (
	// exitOK: run's COMMAND exited 0, or status found KEY held.
	exitOK = 0
	// exitFree: status found KEY free.
	exitFree = 1
	// exitUsage (EX_USAGE): bad flags, arguments or environment.
	exitUsage = 64
	// exitUnavailable (EX_UNAVAILABLE): fewer than a quorum of nodes
	// answered, so the lock could neither be taken nor ruled out.
	exitUnavailable = 69
	// exitConflict (EX_TEMPFAIL): the lock is held elsewhere (or may be: a
	// server restarted within the TTL). --conflict-exit-code changes it.
	exitConflict = 75
	// exitLost: COMMAND was stopped because the lock was lost or at risk.
	exitLost = 79
	// exitCannotRun and exitNotFound: COMMAND could not be started, as
	// env(1) and timeout(1) report it.
	exitCannotRun = 126
	exitNotFound  = 127
)

func main() {
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}

// cli runs the command line args (without the program name) and returns
// the exit status.
func cli(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, shortUsage)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return runCommand(args[1:], stdout, stderr)
	case "elect":
		return electCommand(args[1:], stdout, stderr)
	case "status":
		return statusCommand(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "quorumlock: unknown command %q\n%s", args[0], shortUsage)
	return exitUsage
}

const shortUsage = `usage: quorumlock run [flags] KEY [--] COMMAND [ARGS...]
       quorumlock run [flags] KEY [KEY...] -- COMMAND [ARGS...]
       quorumlock run --shared [flags] KEY [--] COMMAND [ARGS...]
       quorumlock run -n K [flags] KEY [--] COMMAND [ARGS...]
       quorumlock elect [flags] KEY [--] COMMAND [ARGS...]
       quorumlock status [flags] KEY
       quorumlock status -n K [flags] KEY
('quorumlock help' lists the flags and exit statuses)
`

const usage = `quorumlock runs a command under a distributed lock: flock(1) for a fleet,
over independent Redis masters (Redlock) or one Redis Cluster.

Usage:
  quorumlock run [flags] KEY [--] COMMAND [ARGS...]
  quorumlock run [flags] KEY [KEY...] -- COMMAND [ARGS...]
  quorumlock run --shared [flags] KEY [--] COMMAND [ARGS...]
  quorumlock run -n K [flags] KEY [--] COMMAND [ARGS...]
  quorumlock elect [flags] KEY [--] COMMAND [ARGS...]
  quorumlock status [flags] KEY
  quorumlock status -n K [flags] KEY
  quorumlock help

Flags go before KEY. The first -- after KEY ends the keys, and COMMAND
follows it, a -- of its own included; without a --, COMMAND follows the
one KEY. A key after the first that names a command (on PATH or in
/usr/bin and the like) is refused: "run KEY make -- x" runs "make -- x"
under KEY only when written "run KEY -- make -- x".

run acquires KEY, runs COMMAND in its own process group while keeping the
lock alive, releases the lock once COMMAND and every process of its group
have exited (one that leaves the group, by setsid, runs on without the
lock), and exits with COMMAND's status. COMMAND finds the key in
QUORUMLOCK_KEY (several keys: sorted, joined by commas) and, with
--fencing, the lock's fencing token in QUORUMLOCK_TOKEN.

  With several keys, run holds every one or none: no other lock on any
  of them holds meanwhile. With --shared, run holds a read lock on KEY:
  any number of --shared runs hold it at once, and a plain run of KEY
  (a writer) waits for all of them (exits 75 without --wait); once a
  writer waits, new --shared runs wait behind it. With -n K, run holds
  one of K permits of KEY: K runs at most hold KEY's permits at once, and
  the next exits 75 without --wait, or waits for a permit.

  If the lock is lost while COMMAND runs, or at risk (an extension has
  failed, or the keep-alive stopped at QUORUMLOCK_MAX_HOLD, and less than
  a fifth of the TTL of validity is left), quorumlock prints why on
  stderr, sends SIGTERM to COMMAND's process group, and SIGKILL after
  --kill-after or before the lock's validity ends, whichever is first.
  It never lets COMMAND run on unprotected.
  SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to quorumlock are passed on to
  COMMAND's process group; the lock is released once the group is gone.

elect campaigns for the leadership of KEY until it leads (or --wait ends:
exit 75), runs COMMAND as run does, with QUORUMLOCK_TERM (and
QUORUMLOCK_TOKEN), the term, which grows with each leader, and resigns
once COMMAND's group is gone. Leadership lost or at risk stops COMMAND as
a lost lock does (exit 79). With --again, elect stands again a second
after each term, until a signal.

status prints whether KEY is held, on how many nodes and for how long, and
each node's answer; when --shared runs hold it, each reader and how long it
holds; when a leader holds it, the leader's value and term; with --value,
the lock's value (and the readers') too. With -n K, it prints how many of
K permits are in use, then each permit's slot as it prints a key.

Flags (each also read from the environment variable named after it;
a flag wins over its variable):
  --addrs HOST:PORT,...   the servers: independent Redis masters, each one
                          Redlock node; with --cluster, the seeds of one
                          Redis Cluster                     QUORUMLOCK_ADDRS
  --cluster               the addresses are one Redis Cluster, one node
                          (its masters do not vote apart)   QUORUMLOCK_CLUSTER
  --driver NAME           the Redis client: rueidis (default), goredis,
                          redigo or valkey                  QUORUMLOCK_DRIVER
  --ttl DURATION          the lock's time to live on the servers, renewed
                          every TTL/3 while COMMAND runs (default 10s)
                                                            QUORUMLOCK_TTL
  --node-timeout DURATION bound of every call to a server (default 50ms)
                                                            QUORUMLOCK_NODE_TIMEOUT
  --key-prefix PREFIX     put before KEY on the servers     QUORUMLOCK_KEY_PREFIX
  --username NAME         Redis ACL user                    QUORUMLOCK_USERNAME
  --password PASSWORD     Redis password; prefer the variable: a flag is
                          visible to every user in ps       QUORUMLOCK_PASSWORD
  --tls                   connect with TLS (TLS 1.2 or later, the server
                          name taken from each address)     QUORUMLOCK_TLS
  --tls-ca FILE           PEM certificates to trust instead of the
                          system's (implies --tls)          QUORUMLOCK_TLS_CA
  --tls-cert FILE, --tls-key FILE
                          a client certificate and its key, PEM (imply --tls)
                                                            QUORUMLOCK_TLS_CERT
                                                            QUORUMLOCK_TLS_KEY
run and elect:
  --conflict-exit-code N  the exit status when the lock is held elsewhere
                          (default 75)                      QUORUMLOCK_CONFLICT_EXIT_CODE
  --kill-after DURATION   how long COMMAND has between SIGTERM and SIGKILL
                          when the lock is lost (default 10s; SIGKILL
                          comes sooner if the validity ends sooner)
                                                            QUORUMLOCK_KILL_AFTER
  --quiet                 print nothing when the lock is (or may be) held
                          elsewhere: for cron, which mails any output
                                                            QUORUMLOCK_QUIET
run only:
  --wait DURATION         how long to wait for the lock when it is held
                          (default 0: do not wait)          QUORUMLOCK_WAIT
  --fencing               take a fencing token, given to COMMAND as
                          QUORUMLOCK_TOKEN                  QUORUMLOCK_FENCING
  --shared                a shared (read) lock on one KEY; no variable:
                          a read lock where a write lock was meant would
                          let two writers in
  -n K                    one of K permits of KEY (a semaphore); no
                          variable: permits where a lock was meant would
                          let K holders in
elect only:
  --wait DURATION         how long to campaign (default: until a signal);
                          no variable: QUORUMLOCK_WAIT is run's
  --value VALUE           what status shows of this leader (default
                          HOST:PID)
  --again                 stand again after each term, until a signal
status only:
  --value                 print the lock's value and the readers' (secrets:
                          whoever knows one can release or extend its lock)
  -n K                    the permits in use of KEY's K

Every other setting of fxmodule's configuration is read from its variable
too (QUORUMLOCK_STRATEGY, QUORUMLOCK_QUORUM, QUORUMLOCK_RESTART_GUARD, a
duration; QUORUMLOCK_DISABLE_RESTART_GUARD=true turns the guard off...).

Exit statuses:
  COMMAND's own   run, elect: COMMAND exited (128+N when killed by
                  signal N)
  0               status: KEY is held (-n: every permit is)
  1               status: KEY is free (-n: a permit is)
  64              bad flags, arguments or environment (EX_USAGE)
  69              fewer than a quorum of servers answered (EX_UNAVAILABLE)
  75              run: the lock is held elsewhere (for --shared, by a
                  writer, or a writer waits; for -n, every permit), or
                  may be because a server restarted within the TTL;
                  elect: --wait ended before it led (EX_TEMPFAIL;
                  --conflict-exit-code changes it)
  79              run, elect: COMMAND was stopped because the lock (the
                  leadership) was lost or at risk
  126, 127        run, elect: COMMAND could not be run, or was not found
  128+N           run, elect: quorumlock got signal N before COMMAND
                  started (elect --again: between terms)

Examples:
  # cron on every host; one of them runs the job, the others skip it
  0 3 * * * quorumlock run --quiet --addrs r1:6379,r2:6379,r3:6379 nightly-report -- /usr/local/bin/report

  # a deploy step: wait up to 10 minutes for the migration lock
  quorumlock run --wait 10m db-migrate -- ./migrate up

  # two accounts at once (one hash tag: one slot of a Redis Cluster)
  quorumlock run --wait 1m {acct}:alice {acct}:bob -- ./transfer alice bob 10

  # many readers at once; a plain run of config waits for them all
  quorumlock run --shared --wait 1m config -- ./render-site
  quorumlock run --wait 5m config -- ./edit-config

  # at most two encoders at once across the fleet
  quorumlock run -n 2 --wait 1h encoders -- ./encode video.mkv

  # one scheduler in the fleet; the others stand by and take over
  quorumlock elect --again scheduler -- ./scheduler
  quorumlock status scheduler
`
