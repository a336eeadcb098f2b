package driver_test

import (
	"crypto/sha1"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/quorumlock/quorumlock/core/driver"
)

// Every script has its own name, source and SHA (the SHA1 of its source),
// ScriptBySHA finds it by that SHA, and an unknown Script has none.
func TestScripts(t *testing.T) {
	all := driver.Scripts()
	assert.Len(t, all, 10)
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
		acquisition := s == driver.ScriptAcquireFenced || s == driver.ScriptAcquireGuarded
		assert.Equal(t, acquisition, driver.IsAcquisition(s.SHA(), ""), "%s by SHA", s)
		assert.Equal(t, acquisition, driver.IsAcquisition("", s.Source()), "%s by source", s)
	}
	assert.Equal(t, []string{"release", "extend", "identify"},
		[]string{driver.ScriptRelease.Name(), driver.ScriptExtend.Name(), driver.ScriptIdentify.Name()})
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
