package measure

import (
	"strconv"
	"strings"
)

// keyRing hands out distinct keys without allocating: they are cut from
// one string built in advance. After size keys it starts again from the
// first; a worker that reaches that point released the first key long ago,
// so the key is free again.
type keyRing struct {
	all   string
	width int
	size  int
	next  int
}

// digits is the width of the counter part of a key.
const digits = 7

// newKeyRing prepares size keys "<prefix><worker>:<counter>".
func newKeyRing(prefix string, worker, size int) *keyRing {
	size = min(max(size, 1), 9_999_999)
	head := prefix + strconv.Itoa(worker) + ":"
	width := len(head) + digits
	var b strings.Builder
	b.Grow(width * size)
	var num [digits]byte
	for i := range size {
		b.WriteString(head)
		v := i
		for j := digits - 1; j >= 0; j-- {
			num[j] = byte('0' + v%10)
			v /= 10
		}
		b.Write(num[:])
	}
	return &keyRing{all: b.String(), width: width, size: size}
}

func (k *keyRing) key() string {
	i := k.next
	k.next++
	if k.next == k.size {
		k.next = 0
	}
	return k.all[i*k.width : (i+1)*k.width]
}
