package driver_test

import (
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/quorumlock/quorumlock/core/driver"
)

// Every script has its own name, source and SHA (the SHA1 of its source),
// ScriptBySHA finds it by that SHA, and an unknown Script has none.
func TestScripts(t *testing.T) {
	all := driver.Scripts()
	assert.Len(t, all, 18)
	assert.LessOrEqual(t, len(all), 32, "a Locker keeps a bit per script in a uint32")
	names := map[string]bool{}
	for i, s := range all {
		assert.Equal(t, driver.Script(i), s, "in order")
		sum := sha1.Sum([]byte(s.Source()))
		assert.Equal(t, hex.EncodeToString(sum[:]), s.SHA(), "%s", s)
		assert.NotEmpty(t, s.Source(), "%s", s)
		assert.Equal(t, s.Name(), s.String())
		assert.False(t, names[s.Name()], "%s named twice", s)
		names[s.Name()] = true
		got, ok := driver.ScriptBySHA(s.SHA())
		assert.True(t, ok, "%s", s)
		assert.Equal(t, s, got)
		acquisition := s == driver.ScriptAcquireFenced || s == driver.ScriptAcquireGuarded ||
			s == driver.ScriptAcquireAll || s == driver.ScriptAcquireShared
		assert.Equal(t, acquisition, driver.IsAcquisition(s.SHA(), ""), "%s by SHA", s)
		assert.Equal(t, acquisition, driver.IsAcquisition("", s.Source()), "%s by source", s)
	}
	assert.Equal(t, []string{"release", "extend", "identify", "inspect", "acquire-all", "withdraw"},
		[]string{driver.ScriptRelease.Name(), driver.ScriptExtend.Name(), driver.ScriptIdentify.Name(),
			driver.ScriptInspect.Name(), driver.ScriptAcquireAll.Name(), driver.ScriptWithdraw.Name()},
		"existing scripts keep their numbers; new ones are appended")
	assert.Equal(t, driver.Script(9), driver.ScriptInspect)
	all[0] = driver.ScriptExtend
	assert.Equal(t, driver.ScriptRelease, driver.Scripts()[0], "a new slice each time")

	for _, sha := range []string{"", "0000000000000000000000000000000000000000", driver.ScriptRelease.Source()} {
		_, ok := driver.ScriptBySHA(sha)
		assert.False(t, ok, "%q", sha)
	}
	assert.False(t, driver.IsAcquisition("", ""))
	unknown := driver.Script(200)
	assert.Equal(t, "script(200)", unknown.Name())
	assert.Empty(t, unknown.Source())
	assert.Empty(t, unknown.SHA())
}

// The readers set and the writer mark of a key share its cluster slot,
// named as the fencing counter is; SharedValue can never be a lock value.
func TestSharedKeys(t *testing.T) {
	for _, c := range []struct{ key, readers, writer string }{
		{"orders:42", "{orders:42}:readers", "{orders:42}:writer"},
		{"{user:1}:lock", "{user:1}:lock:readers", "{user:1}:lock:writer"},
	} {
		r, ok := driver.ReadersKey(c.key)
		assert.True(t, ok)
		assert.Equal(t, c.readers, r)
		w, ok := driver.WriterKey(c.key)
		assert.True(t, ok)
		assert.Equal(t, c.writer, w)
		assert.Equal(t, driver.HashSlot(c.key), driver.HashSlot(r))
		assert.Equal(t, driver.HashSlot(c.key), driver.HashSlot(w))
	}
	_, ok := driver.ReadersKey("a}b")
	assert.False(t, ok, "a key with no hash tag that contains } has no readers set")
	_, ok = driver.WriterKey("a}b")
	assert.False(t, ok)
	assert.NotEqual(t, 27, len(driver.SharedValue), "not the length of a lock value")
	assert.Equal(t, 27, base64.RawURLEncoding.EncodedLen(driver.ValueBytes))
}
