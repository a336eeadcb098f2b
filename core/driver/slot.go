package driver

import "strings"

// SlotCount is the number of hash slots of a Redis Cluster.
const SlotCount = 16384

// HashSlot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of
// the key modulo 16384, where only the part between the first "{" and the
// next "}" counts when that part is not empty (the hash-tag rule). Every key
// the protocol touches for one lock must hash to the lock key's slot, so
// that one cluster master can run the whole operation; the conformance suite
// checks this against real clusters' CLUSTER KEYSLOT.
func HashSlot(key string) int {
	if tag, ok := hashTag(key); ok {
		key = tag
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^key[i]]
	}
	return int(crc) % SlotCount
}

// hashTag returns the part of key between the first "{" and the next "}",
// if that part is not empty.
func hashTag(key string) (string, bool) {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			return key[open+1 : open+1+end], true
		}
	}
	return "", false
}

func hasHashTag(key string) bool {
	_, ok := hashTag(key)
	return ok
}

// crc16Table is CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0),
// the checksum Redis Cluster hashes keys with.
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()
