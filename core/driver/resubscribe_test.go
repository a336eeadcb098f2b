package driver_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/core/driver"
)

// conn stands for a driver's subscription connection: each attempt of
// receive takes the next scripted outcome.
type conn struct {
	mu       sync.Mutex
	attempts int
	lose     chan struct{} // closing it ends the current attempt (a lost connection)
	publish  chan string
}

func (c *conn) receive(fail error) driver.ReceiveFunc {
	return func(ctx context.Context, subscribed func(), message func(string)) error {
		c.mu.Lock()
		c.attempts++
		lose := c.lose
		c.mu.Unlock()
		if fail != nil {
			return fail
		}
		subscribed()
		subscribed() // a second confirmation of the same attempt counts once
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-lose:
				return errors.New("connection reset")
			case m := <-c.publish:
				message(m)
			}
		}
	}
}

func (c *conn) drop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.lose)
	c.lose = make(chan struct{})
}

func TestResubscribe(t *testing.T) {
	t.Run("messages, then a lost connection", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := &conn{lose: make(chan struct{}), publish: make(chan string)}
			var mu sync.Mutex
			var got []string
			notify := func(m string) { mu.Lock(); got = append(got, m); mu.Unlock() }
			stop, err := driver.Resubscribe(t.Context(), c.receive(nil), notify, func(error) bool { return false })
			require.NoError(t, err)
			c.publish <- "t1"
			c.drop()
			time.Sleep(driver.MinBackoff) // fake time: the pause before subscribing again
			synctest.Wait()
			c.publish <- "t2"
			stop()
			stop() // twice is harmless
			assert.Equal(t, []string{"t1", "", "t2"}, got, "an empty notice after subscribing again")
			assert.Equal(t, 2, c.attempts)
		})
	})
	t.Run("the first attempt fails", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := &conn{lose: make(chan struct{})}
			stop, err := driver.Resubscribe(t.Context(), c.receive(errors.New("ERR no pub/sub")), func(string) {}, func(error) bool { return false })
			require.EqualError(t, err, "ERR no pub/sub")
			assert.Nil(t, stop)
		})
	})
	t.Run("ctx ends before the confirmation", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			hang := driver.ReceiveFunc(func(ctx context.Context, _ func(), _ func(string)) error { <-ctx.Done(); return ctx.Err() })
			stop, err := driver.Resubscribe(ctx, hang, func(string) {}, func(error) bool { return false })
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Nil(t, stop)
		})
	})
	t.Run("stop, twice at once, during the pause before subscribing again", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := &conn{lose: make(chan struct{}), publish: make(chan string)}
			stop, err := driver.Resubscribe(t.Context(), c.receive(nil), func(string) {}, func(error) bool { return false })
			require.NoError(t, err)
			c.drop()
			synctest.Wait() // pausing for driver.MinBackoff
			start := time.Now()
			var wg sync.WaitGroup
			for range 2 {
				wg.Go(stop)
			}
			wg.Wait()
			assert.Zero(t, time.Since(start), "the pause is cut short")
			assert.Equal(t, 1, c.attempts, "no attempt after stop")
		})
	})
	t.Run("a closed client ends the goroutine", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := &conn{lose: make(chan struct{}), publish: make(chan string)}
			stop, err := driver.Resubscribe(t.Context(), c.receive(nil), func(string) {}, func(err error) bool { return err != nil })
			require.NoError(t, err)
			c.drop()
			synctest.Wait() // the goroutine has ended: no second attempt
			assert.Equal(t, 1, c.attempts)
			stop()
		})
	})
}
