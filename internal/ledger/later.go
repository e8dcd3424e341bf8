package ledger

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Later is a Ledger opened once its back end can be: a bolt file that
// another process holds (ErrLocked) while `caddy validate` checks a config
// of the running gateway, or that a config being replaced in this process
// still holds. It tries to open every retry interval; until it has, every
// call fails with ErrUnavailable saying why, and nothing is run.
type Later struct {
	open   func() (Ledger, error)
	logger *zap.Logger

	mu     sync.RWMutex
	l      Ledger
	err    error // why it is not open yet
	closed bool

	stop    chan struct{}
	stopped chan struct{}
}

// OpenLater returns a Later that calls open every retry until it
// succeeds; why is the error of the attempt that failed already.
func OpenLater(open func() (Ledger, error), why error, retry time.Duration, logger *zap.Logger) *Later {
	if logger == nil {
		logger = zap.NewNop()
	}
	l := &Later{open: open, logger: logger, err: why, stop: make(chan struct{}), stopped: make(chan struct{})}
	go l.retry(retry)
	return l
}

func (l *Later) retry(every time.Duration) {
	defer close(l.stopped)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		opened, err := l.open()
		l.mu.Lock()
		if l.closed {
			// Closed while opening: the ledger must not stay open.
			l.mu.Unlock()
			if err == nil {
				_ = opened.Close()
			}
			return
		}
		if err == nil {
			l.l, l.err = opened, nil
			l.mu.Unlock()
			l.logger.Info("ledger opened: its file is free")
			return
		}
		if err.Error() != l.err.Error() {
			l.logger.Error("ledger still not open; calls answer 503", zap.Error(err))
		}
		l.err = err
		l.mu.Unlock()
	}
}

// Opened returns the ledger once it is open: for what shares its back
// end (the connections' bucket in its bolt file).
func (l *Later) Opened() (Ledger, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.l, l.l != nil
}

// ledger returns the open ledger, or ErrUnavailable with the reason.
func (l *Later) ledger() (Ledger, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.l != nil {
		return l.l, nil
	}
	if l.closed {
		return nil, fmt.Errorf("%w: closed", ErrUnavailable)
	}
	return nil, fmt.Errorf("%w: not open yet: %w", ErrUnavailable, l.err)
}

// Create implements Ledger.
func (l *Later) Create(ctx context.Context, c *Call) (*Call, bool, error) {
	led, err := l.ledger()
	if err != nil {
		return nil, false, err
	}
	return led.Create(ctx, c)
}

// Get implements Ledger.
func (l *Later) Get(ctx context.Context, key string) (*Call, error) {
	led, err := l.ledger()
	if err != nil {
		return nil, err
	}
	return led.Get(ctx, key)
}

// Update implements Ledger.
func (l *Later) Update(ctx context.Context, c *Call, from State) (*Call, error) {
	led, err := l.ledger()
	if err != nil {
		return nil, err
	}
	return led.Update(ctx, c, from)
}

// Wait implements Ledger. A Wait begun before the ledger opened fails at
// once: there is nothing to wait on.
func (l *Later) Wait(ctx context.Context, key string, state State) (*Call, error) {
	led, err := l.ledger()
	if err != nil {
		return nil, err
	}
	return led.Wait(ctx, key, state)
}

// Spend implements Ledger.
func (l *Later) Spend(ctx context.Context, id string, until time.Time) (bool, error) {
	led, err := l.ledger()
	if err != nil {
		return false, err
	}
	return led.Spend(ctx, id, until)
}

// Close stops trying and closes the ledger if it was opened.
// Records implements Ledger: the bolt ledger it opens keeps every call.
func (l *Later) Records() bool { return true }

func (l *Later) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.stop)
	l.mu.Unlock()
	<-l.stopped
	if l.l != nil {
		return l.l.Close()
	}
	return nil
}

// Interface guards
var _ Ledger = (*Later)(nil)

// Waiting implements Ledger.
func (l *Later) Waiting(ctx context.Context, user, install string) ([]*Call, error) {
	led, err := l.ledger()
	if err != nil {
		return nil, err
	}
	return led.Waiting(ctx, user, install)
}
