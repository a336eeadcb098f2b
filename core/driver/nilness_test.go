package driver

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

type iface interface{ M() }

type impl struct{}

func (*impl) M() {}

func TestIsNil(t *testing.T) {
	var p *impl
	var i iface = p
	var m map[string]int
	var f func()
	assert.True(t, IsNil(nil))
	assert.True(t, IsNil(i), "a nil pointer in an interface")
	assert.True(t, IsNil(m))
	assert.True(t, IsNil(f))
	assert.False(t, IsNil(&impl{}))
	assert.False(t, IsNil(0))
	assert.False(t, IsNil(struct{}{}))
}
