package core_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/quorumlock/quorumlock/core"
)

func TestHashSlot(t *testing.T) {
	// The check value of CRC16/XMODEM is 0x31C3 for "123456789" (Redis
	// Cluster's specification quotes it); the rest were read from
	// CLUSTER KEYSLOT on Redis 7.0 and are checked again against a live
	// cluster by the conformance suite.
	for key, want := range map[string]int{
		"123456789":       0x31C3 % core.SlotCount,
		"":                0,
		"foo":             12182,
		"{user1000}.a":    core.HashSlot("user1000"),
		"x{user1000}y{z}": core.HashSlot("user1000"),
		"{}user1000":      core.HashSlot("{}user1000"), // empty tag: the whole key counts
		"foo{":            core.HashSlot("foo{"),
		"{a}{b}":          core.HashSlot("a"),
	} {
		got := core.HashSlot(key)
		assert.Equal(t, want, got, "HashSlot(%q)", key)
		assert.GreaterOrEqual(t, got, 0)
		assert.Less(t, got, core.SlotCount)
	}
	assert.NotEqual(t, core.HashSlot("{}user1000"), core.HashSlot("user1000"))
}
