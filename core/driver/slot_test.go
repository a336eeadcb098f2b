package driver_test

import (
	"testing"

	"github.com/quorumlock/quorumlock/core/driver"

	"github.com/stretchr/testify/assert"
)

func TestHashSlot(t *testing.T) {
	// The check value of CRC16/XMODEM is 0x31C3 for "123456789" (Redis
	// Cluster's specification quotes it); the others are what CLUSTER
	// KEYSLOT answers on Redis 7.0. The conformance suite compares HashSlot
	// with a live cluster again, for keys of its own.
	for key, want := range map[string]int{
		"123456789":       0x31C3 % driver.SlotCount,
		"":                0,
		"foo":             12182,
		"user1000":        3443,
		"{user1000}.a":    3443, // the tag alone hashes
		"x{user1000}y{z}": 3443, // the first tag counts
		"{}user1000":      7326, // empty tag: the whole key hashes
		"foo{":            7673, // no closing brace: no tag
		"foo{}bar":        14292,
		"{a}{b}":          15495, // the slot of "a"
		"{}":              15257,
	} {
		assert.Equal(t, want, driver.HashSlot(key), "HashSlot(%q)", key)
	}
}
