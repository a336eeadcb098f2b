package conformance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
)

func TestFind(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	assert.NoError(t, FindLeaks(time.Second, ignore), "nothing started, nothing found")

	// A goroutine that ends within the grace is not a leak.
	release := make(chan struct{})
	go func() { <-release }()
	time.AfterFunc(100*time.Millisecond, func() { close(release) })
	assert.NoError(t, FindLeaks(3*time.Second, ignore))

	// One that outlives it is.
	stuck := make(chan struct{})
	go func() { <-stuck }()
	assert.Error(t, FindLeaks(200*time.Millisecond, ignore))
	close(stuck)
	assert.NoError(t, FindLeaks(3*time.Second, ignore))
}
