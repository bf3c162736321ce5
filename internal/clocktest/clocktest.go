// Package clocktest is a clock that tests move by hand, to inject as the
// `now func() time.Time` (and `sleep`) of the code under test instead of
// sleeping.
package clocktest

import (
	"context"
	"sync"
	"time"
)

// Clock reads a time that moves only when the test moves it. It is safe for
// concurrent use.
type Clock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

// New returns a clock that reads t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time, then moves it on by the step (zero unless
// SetStep was called: for code that spins until the clock moves).
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.t
	c.t = c.t.Add(c.step)
	return t
}

// Add moves the clock by d, backwards when d is negative.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// SetStep makes every reading move the clock on by d.
func (c *Clock) SetStep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.step = d
}

// Sleep moves the clock by d at once and returns ctx's error, so code that
// waits never takes real time.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	c.Add(d)
	return ctx.Err()
}
