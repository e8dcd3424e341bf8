package ledger

import (
	"context"
	"fmt"
	"sync"
)

// errClosed is what a Wait still blocked when its ledger closes gets. It
// wraps ErrUnavailable because, to the caller, a closed ledger is one that
// cannot record anything.
var errClosed = fmt.Errorf("%w: closed", ErrUnavailable)

// waiters wakes the goroutines in Wait when a call may have changed. A
// wake-up only says "read again": the reader decides whether the state moved,
// so a spurious or duplicated wake-up costs one read and nothing else.
type waiters struct {
	mu     sync.Mutex
	byKey  map[string]map[chan struct{}]struct{}
	closed chan struct{}
}

func newWaiters() *waiters {
	return &waiters{
		byKey:  make(map[string]map[chan struct{}]struct{}),
		closed: make(chan struct{}),
	}
}

// add registers a waiter for key. The channel holds one pending wake-up, so
// a notify that lands between add and the waiter's first read is not lost.
func (w *waiters) add(key string) chan struct{} {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	set := w.byKey[key]
	if set == nil {
		set = make(map[chan struct{}]struct{})
		w.byKey[key] = set
	}
	set[ch] = struct{}{}
	w.mu.Unlock()
	return ch
}

func (w *waiters) remove(key string, ch chan struct{}) {
	w.mu.Lock()
	if set := w.byKey[key]; set != nil {
		delete(set, ch)
		if len(set) == 0 {
			delete(w.byKey, key)
		}
	}
	w.mu.Unlock()
}

// notify wakes every waiter for key without blocking: a waiter that already
// has a wake-up pending will read the newest state anyway.
func (w *waiters) notify(key string) {
	w.mu.Lock()
	for ch := range w.byKey[key] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	w.mu.Unlock()
}

// notifyAll wakes every waiter, for when wake-ups may have been missed (a
// pub/sub connection that dropped and came back).
func (w *waiters) notifyAll() {
	w.mu.Lock()
	for _, set := range w.byKey {
		for ch := range set {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	w.mu.Unlock()
}

// close makes every Wait return errClosed.
func (w *waiters) close() {
	close(w.closed)
}

// wait implements Ledger.Wait over get. The waiter is registered before the
// first read so an Update that commits in between still wakes it.
func (w *waiters) wait(ctx context.Context, key string, state State, get func(context.Context, string) (*Call, error)) (*Call, error) {
	ch := w.add(key)
	defer w.remove(key, ch)
	for {
		c, err := get(ctx, key)
		if err != nil {
			return nil, err
		}
		if c.State != state {
			return c, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-w.closed:
			return nil, errClosed
		}
	}
}
