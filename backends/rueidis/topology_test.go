package rueidis_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	qlrueidis "github.com/quorumlock/quorumlock/backends/rueidis"
	"github.com/quorumlock/quorumlock/conformance/misuse"
	"github.com/quorumlock/quorumlock/conformance/redistest"
	"github.com/quorumlock/quorumlock/core"
)

// The subtests of TestTopologyRueidis are rows of the table of client types
// of docs/topologies.md (TestReadmeTopologyTable, in core, checks that each
// one is named there, and that each test named there exists).

// advice is the stable part of what New's refusals advise.
const advice = "give each independent master (not its replicas) as its own node: a client of one master"

func TestTopologyRueidis(t *testing.T) {
	t.Run("sentinel_client", func(t *testing.T) {
		t.Parallel()
		master, _ := startServer(t)
		o := qlrueidis.ClientOption(startSentinel(t, master))
		o.Sentinel.MasterSet = "mymaster"
		c, err := rueidis.NewClient(o)
		require.NoError(t, err)
		defer c.Close()
		require.Equal(t, rueidis.ClientModeSentinel, c.Mode())

		n, err := qlrueidis.New(c)
		require.Nil(t, n)
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument,
			"quorumlock: invalid argument: rueidis: client sentinel:"+master.Addr()+" is a Sentinel client (ClientOption.Sentinel), "+
				"which moves to a promoted replica when its master fails")
		require.ErrorContains(t, err, advice)
	})
	t.Run("standalone_with_replicas", func(t *testing.T) {
		t.Parallel()
		primary, _ := startServer(t)
		replica, rc := startServer(t)
		ctx := t.Context()
		require.NoError(t, rc.Do(ctx, rc.B().Replicaof().Host("127.0.0.1").Port(int64(primary.Port())).Build()).Error())
		o := qlrueidis.ClientOption(primary.Addr())
		o.Standalone.ReplicaAddress = []string{replica.Addr()}
		o.SendToReplicas = func(cmd rueidis.Completed) bool { return cmd.IsReadOnly() }
		c, err := rueidis.NewClient(o)
		require.NoError(t, err)
		defer c.Close()
		require.Equal(t, rueidis.ClientModeStandalone, c.Mode(), "the mode of a client of one server")

		n, err := qlrueidis.New(c)
		require.Nil(t, n)
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument, "quorumlock: invalid argument: rueidis: client ")
		require.ErrorContains(t, err, " was made with Standalone.ReplicaAddress or Standalone.EnableRedirect, "+
			"so it sends commands to other servers than its primary")
		require.ErrorContains(t, err, advice)

		// Wrapped, the client is judged by the servers it reports.
		type instrumented struct{ rueidis.Client }
		n, err = qlrueidis.New(instrumented{c})
		require.Nil(t, n)
		misuse.RequireMisuse(t, err, core.ErrInvalidArgument, " reaches 2 servers in standalone mode")
		require.ErrorContains(t, err, advice)
	})
	t.Run("several_standalone_addresses", func(t *testing.T) {
		t.Parallel()
		// rueidis takes several addresses for a cluster's, and fails
		// when they are not.
		first, fc := startServer(t)
		second, sc := startServer(t)
		_, err := rueidis.NewClient(qlrueidis.ClientOption(first.Addr(), second.Addr()))
		require.ErrorContains(t, err, "cluster support disabled")

		// With ForceSingleClient it talks to the first address only, for
		// the client's whole life: a key never moves to the second.
		o := qlrueidis.ClientOption(first.Addr(), second.Addr())
		o.ForceSingleClient = true
		c, err := rueidis.NewClient(o)
		require.NoError(t, err)
		defer c.Close()
		n, err := qlrueidis.New(c)
		require.NoError(t, err)
		assert.Equal(t, first.Addr(), n.String())

		l, err := core.New([]core.Node{n}, core.WithNodeTimeout(misuse.NodeTimeout))
		require.NoError(t, err)
		defer l.Close()
		ctx := t.Context()
		const key = "orders:42"
		_, err = l.TryAcquire(ctx, key)
		require.NoError(t, err)
		requireExists(t, fc, key, 1)
		require.NoError(t, first.Stop())
		// The client's connection ends (EOF) or is refused: either way it
		// does not move to the second server.
		_, err = l.TryAcquire(ctx, "orders:43")
		require.ErrorIs(t, err, core.ErrUnavailable)
		requireExists(t, sc, key, 0)
		requireExists(t, sc, "orders:43", 0)
	})
}

// requireExists checks how many of keys c's server has.
func requireExists(t *testing.T, c rueidis.Client, key string, want int64) {
	t.Helper()
	n, err := c.Do(t.Context(), c.B().Exists().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	require.Equal(t, want, n, "key %q", key)
}

// startSentinel starts a Redis Sentinel (redis-server in sentinel mode,
// which needs a configuration file of its own) that monitors master as
// "mymaster", and returns its address once it names master. It is killed
// at the end of the test.
func startSentinel(t *testing.T, master *redistest.Server) string {
	t.Helper()
	bin, err := redistest.Binary()
	require.NoError(t, err)
	port, err := redistest.FreePort()
	require.NoError(t, err)
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	require.NoError(t, os.WriteFile(conf, fmt.Appendf(nil,
		"port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\nsentinel monitor mymaster 127.0.0.1 %d 1\n",
		port, dir, filepath.Join(dir, "sentinel.log"), master.Port()), 0o600))
	cmd := exec.Command(bin, conf, "--sentinel")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})

	addr := "127.0.0.1:" + strconv.Itoa(port)
	o := qlrueidis.ClientOption(addr)
	o.ForceSingleClient = true
	o.Dialer.Timeout = time.Second
	c, err := rueidis.NewClient(o) // a client of the sentinel itself, which may not listen yet
	require.NotNil(t, c, "with ForceSingleClient, rueidis makes a client whatever the server does: %v", err)
	defer c.Close()
	require.Eventually(t, func() bool {
		select {
		case <-exited:
			return true // reported below
		default:
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		named, err := c.Do(ctx, c.B().Arbitrary("SENTINEL", "GET-MASTER-ADDR-BY-NAME").Args("mymaster").Build()).AsStrSlice()
		return err == nil && len(named) == 2 && named[1] == strconv.Itoa(master.Port())
	}, 10*time.Second, 10*time.Millisecond, "the sentinel never named the master")
	select {
	case <-exited:
		log, _ := os.ReadFile(filepath.Join(dir, "sentinel.log"))
		require.FailNow(t, "the sentinel exited", "%s", log)
	default:
	}
	return addr
}
