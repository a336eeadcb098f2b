package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/conformance/redistest"
)

// Bad flags, arguments or environment exit 64 with a usage message, and
// run no COMMAND.
func TestUsage(t *testing.T) {
	t.Parallel()
	addrs := serverAddrs(t)
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate"), 0o600))
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string // in stderr
	}{
		{"no command", nil, nil, "usage: quorumlock run"},
		{"unknown command", nil, []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"unknown flag", nil, []string{"run", "--bogus", "k", "--", "echo", "ran"}, "-bogus"},
		{"no key", nil, []string{"run"}, "want KEY [--] COMMAND"},
		{"no command after key", nil, []string{"run", "k", "--"}, "want KEY [--] COMMAND"},
		{"flag after key", nil, []string{"run", "k", "--wait", "1s", "echo", "ran"}, "put flags before KEY"},
		{"flag after key, then --", nil, []string{"run", "k", "--wait", "1s", "--", "echo", "ran"}, "put flags before KEY"},
		{"flag among keys", nil, []string{"run", "a", "--shared", "b", "--", "echo", "ran"}, "put flags before KEY"},
		{"command's -- without KEY --", nil, []string{"run", "k", "sh", "-c", "echo ran", "--", "x"}, `"sh" among the keys before -- is also a command`},
		{"a flag among the keys", nil, []string{"run", "k", "{k}:sh", "-c", "echo ran", "--", "x"}, `"-c" among the keys before --`},
		{"a command among the keys", nil, []string{"run", "k", "echo", "ran", "--", "x"}, `"echo" among the keys before -- is also a command`},
		{"a command among tagged keys", nil, []string{"run", "{acct}:alice", "echo", "--", "x"}, "such as {acct}:echo"},
		{"a command among the keys, short PATH", []string{"PATH=/nonexistent"}, []string{"run", "k", "sh", "--", "x"}, `"sh" among the keys before -- is also a command`},
		{"shared with two keys", nil, []string{"run", "--shared", "a", "b", "--", "echo", "ran"}, "--shared takes one KEY, not 2"},
		{"key given twice", nil, []string{"run", "a", "b", "a", "--", "echo", "ran"}, `key "a" is given twice`},
		{"empty key among keys", nil, []string{"run", "a", "", "--", "echo", "ran"}, "key is empty"},
		{"flag's bad duration", nil, []string{"run", "--ttl", "5", "k", "--", "echo", "ran"}, `"5" is not a duration`},
		{"bad duration", nil, []string{"run", "--wait", "soon", "k", "--", "echo", "ran"}, `"soon" is not a duration`},
		{"negative wait", nil, []string{"run", "--wait", "-1s", "k", "--", "echo", "ran"}, "--wait -1s is negative"},
		{"bad exit code", nil, []string{"run", "--conflict-exit-code", "300", "k", "--", "echo", "ran"}, "not an exit status"},
		{"unknown driver", nil, []string{"run", "--driver", "jedis", "k", "--", "echo", "ran"}, `unknown driver "jedis"`},
		{"redigo cluster", nil, []string{"run", "--driver", "redigo", "--cluster", "k", "--", "echo", "ran"}, "redigo has no Redis Cluster client"},
		{"ttl within node timeout", nil, []string{"run", "--ttl", "10ms", "k", "--", "echo", "ran"}, "TTL"},
		{"bad address", nil, []string{"run", "--addrs", "localhost", "k", "--", "echo", "ran"}, "localhost"},
		{"no addresses", []string{"QUORUMLOCK_ADDRS="}, []string{"run", "k", "--", "echo", "ran"}, "no servers"},
		{"bad variable", []string{"QUORUMLOCK_TTL=long"}, []string{"run", "k", "--", "echo", "ran"}, "QUORUMLOCK_TTL"},
		{"bad own variable", []string{"QUORUMLOCK_KILL_AFTER=never"}, []string{"run", "k", "--", "echo", "ran"}, "QUORUMLOCK_KILL_AFTER"},
		{"tls cert without key", nil, []string{"run", "--tls-cert", notPEM, "k", "--", "echo", "ran"}, "--tls-cert and --tls-key go together"},
		{"tls ca not pem", nil, []string{"run", "--tls-ca", notPEM, "k", "--", "echo", "ran"}, "no PEM certificate"},
		{"empty key", nil, []string{"run", "", "--", "echo", "ran"}, "key is empty"},
		{"reserved key", nil, []string{"status", "quorumlock:birth"}, "reserved"},
		{"status without key", nil, []string{"status"}, "want one KEY"},
		{"status with run's flag", nil, []string{"status", "--wait", "1s", "k"}, "-wait"},
		{"status --shared", nil, []string{"status", "--shared", "k"}, "-shared"},
		{"status with two keys", nil, []string{"status", "a", "b"}, "want one KEY"},
		{"no permits", nil, []string{"run", "-n", "0", "k", "--", "echo", "ran"}, `invalid value "0" for flag -n: want the number of permits, 1 or more`},
		{"permits not a number", nil, []string{"run", "-n", "two", "k", "--", "echo", "ran"}, "want the number of permits"},
		{"permits of two keys", nil, []string{"run", "-n", "2", "a", "b", "--", "echo", "ran"}, "-n takes one KEY and no --shared"},
		{"shared permits", nil, []string{"run", "-n", "2", "--shared", "a", "--", "echo", "ran"}, "-n takes one KEY and no --shared"},
		{"too many permits", nil, []string{"run", "-n", "100000", "k", "--", "echo", "ran"}, "permits 100000 must be 1 to 1024"},
		{"status no permits", nil, []string{"status", "-n", "-1", "k"}, "want the number of permits"},
		{"elect without command", nil, []string{"elect", "k"}, "want KEY [--] COMMAND"},
		{"elect two keys", nil, []string{"elect", "a", "b", "--", "echo", "ran"}, "elect takes one KEY, not 2"},
		{"elect --wait 0", nil, []string{"elect", "--wait", "0", "k", "--", "echo", "ran"}, "--wait 0: a campaign waits"},
		{"elect with run's flag", nil, []string{"elect", "--shared", "k", "--", "echo", "ran"}, "--shared"},
		{"elect flag after key", nil, []string{"elect", "k", "--again", "--", "echo", "ran"}, "put flags before KEY"},
		{"elect bad value", nil, []string{"elect", "--value", "a\tb", "k", "--", "echo", "ran"}, "control character"},
		{"elect empty value", nil, []string{"elect", "--value=", "k", "--", "echo", "ran"}, "empty: give the value a leader shows"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runCLI(t, addrs, c.env, c.args...)
			assert.Equal(t, exitUsage, r.code, "stderr: %s", r.stderr)
			assert.Contains(t, r.stderr, c.want)
			assert.Contains(t, r.stderr, "usage: quorumlock")
			onePrefix(t, r.stderr)
			assert.NotContains(t, r.stdout, "ran", "COMMAND must not run")
		})
	}
}

// help prints the usage, with every exit status, on stdout.
func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"help"}, {"--help"}, {"run", "-h"}, {"elect", "-h"}} {
		r := runCLI(t, nil, nil, args...)
		assert.Equal(t, exitOK, r.code, "%q", args)
		for _, want := range []string{"quorumlock run [flags] KEY [--] COMMAND", "--quiet", "QUORUMLOCK_ADDRS", "64", "69", "75", "79", "--kill-after",
			"quorumlock run -n K", "quorumlock elect [flags] KEY", "--again", "QUORUMLOCK_TERM", "status -n K"} {
			assert.Contains(t, r.stdout, want, "%q", args)
		}
	}
}

// status says free (1) or held (0), on how many nodes and for how long,
// shows the value only with --value, and exits 69 when no quorum answers;
// run exits 69 too then.
func TestStatus(t *testing.T) {
	t.Parallel()
	addrs := serverAddrs(t)
	k := key(t)
	r := runCLI(t, addrs, nil, "status", k)
	assert.Equal(t, exitFree, r.code, r.stderr)
	assert.Contains(t, r.stdout, k+": free")

	lock, err := testLocker(t, addrs).Acquire(t.Context(), k)
	require.NoError(t, err)
	r = runCLI(t, addrs, nil, "status", k)
	assert.Equal(t, exitOK, r.code, r.stderr)
	assert.Regexp(t, `: held on 3 of 3 nodes \(quorum 2\), [0-9.]+s left`, r.stdout)
	assert.NotContains(t, r.stdout, lock.Value(), "the value is a secret")
	r = runCLI(t, addrs, nil, "status", "--value", k)
	assert.Contains(t, r.stdout, lock.Value())
	require.NoError(t, lock.Release(t.Context()))

	dead := []string{redistest.DeadAddr(t), redistest.DeadAddr(t), addrs[0]}
	r = runCLI(t, dead, nil, "status", k)
	assert.Equal(t, exitUnavailable, r.code, "stdout: %s stderr: %s", r.stdout, r.stderr)
	assert.Contains(t, r.stderr, "too many nodes unavailable")
	onePrefix(t, r.stderr)
	r = runCLI(t, dead, nil, "run", k, "--", "echo", "ran")
	assert.Equal(t, exitUnavailable, r.code, r.stderr)
	assert.NotContains(t, r.stdout, "ran")
	assert.Contains(t, r.stderr, "fewer than a quorum of servers answered")
	onePrefix(t, r.stderr)
}
