// Package clock is the one clock of toolgate's packages: the real one in
// production, a Manual one that tests set and move.
package clock

import (
	"sync"
	"time"
)

// Clock tells the time.
type Clock interface {
	Now() time.Time
}

// Real is the system clock.
var Real Clock = real{}

type real struct{}

func (real) Now() time.Time { return time.Now() }

// Or returns c, or Real when c is nil: a config's zero value means the
// system clock.
func Or(c Clock) Clock {
	if c == nil {
		return Real
	}
	return c
}

// Manual is a clock that moves only when told; safe for concurrent use.
type Manual struct {
	mu  sync.Mutex
	now time.Time
}

// NewManual returns a clock that reads t until it is moved.
func NewManual(t time.Time) *Manual { return &Manual{now: t} }

// Now returns the clock's time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// Set sets the clock's time.
func (m *Manual) Set(t time.Time) {
	m.mu.Lock()
	m.now = t
	m.mu.Unlock()
}

// Add moves the clock by d and returns the new time.
func (m *Manual) Add(d time.Duration) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = m.now.Add(d)
	return m.now
}

// Every calls f every interval, on the real time (a ticker), until stop
// is closed. A background sweep runs on it.
func Every(stop <-chan struct{}, every time.Duration, f func()) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			f()
		}
	}
}
