package demo

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestParseAddrs(t *testing.T) {
	assert.Empty(t, ParseAddrs(""))
	assert.Empty(t, ParseAddrs(" , "))
	assert.Equal(t, []string{"a:1", "b:2"}, ParseAddrs(" a:1, ,b:2,"))
}

func TestPlural(t *testing.T) {
	assert.Equal(t, "0 nodes", Plural(0, "node"))
	assert.Equal(t, "1 node", Plural(1, "node"))
	assert.Equal(t, "3 Redis servers", Plural(3, "Redis server"))
}

func TestServersEmbedded(t *testing.T) {
	s, err := Start(nil, 3)
	require.NoError(t, err)
	defer s.Close()
	assert.True(t, s.Embedded())
	assert.Len(t, s.Addrs(), 3)
	assert.Equal(t, "3 embedded miniredis servers", s.Where())

	conn, err := net.DialTimeout("tcp", s.Addrs()[1], time.Second)
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	s.Stop(1)
	_, err = net.DialTimeout("tcp", s.Addrs()[1], time.Second)
	require.Error(t, err, "a stopped server refuses connections")
	s.Close()
}

func TestServersAddrs(t *testing.T) {
	for _, tc := range []struct {
		addrs []string
		where string
	}{
		{[]string{"a:1"}, "1 Redis server from REDIS_ADDRS (a:1)"},
		{[]string{"a:1", "b:2"}, "2 Redis servers from REDIS_ADDRS (a:1, b:2)"},
	} {
		s, err := Start(tc.addrs, 5)
		require.NoError(t, err)
		assert.False(t, s.Embedded())
		assert.Equal(t, tc.addrs, s.Addrs())
		assert.Equal(t, tc.where, s.Where())
		s.Close()
	}
}
