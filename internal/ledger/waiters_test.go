package ledger

import (
	"context"
	"errors"
	"testing"
	"time"
)

// An Update that commits right after a waiter's read, before the waiter
// sleeps, must still wake it: the waiter is registered before it reads.
func TestWaitUpdateBetweenReadAndSleep(t *testing.T) {
	w := newWaiters()
	reads := 0
	get := func(ctx context.Context, key string) (*Call, error) {
		reads++
		if reads == 1 {
			// The Update lands here: after the state was read as
			// running, before Wait blocks.
			w.notify(key)
			return &Call{Key: key, State: Running}, nil
		}
		return &Call{Key: key, State: Done}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := w.wait(ctx, "k", Running, get)
	if err != nil || c.State != Done {
		t.Fatalf("wait = %+v, %v after %d reads; want done (the wake-up was lost)", c, err, reads)
	}
}

// A lost subscription is made good by waking everyone.
func TestWaitNotifyAll(t *testing.T) {
	w := newWaiters()
	state := Running
	read := make(chan struct{}, 2)
	get := func(ctx context.Context, key string) (*Call, error) {
		c := &Call{Key: key, State: state}
		read <- struct{}{}
		return c, nil
	}
	res := make(chan error, 1)
	go func() {
		_, err := w.wait(context.Background(), "k", Running, get)
		res <- err
	}()
	<-read
	w.notify("other key")
	select {
	case <-read:
		t.Fatal("a wake-up for another key made the waiter read")
	case <-time.After(50 * time.Millisecond):
	}
	state = Done
	w.notifyAll()
	select {
	case err := <-res:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("notifyAll did not wake the waiter")
	}
}

func TestWaitClosed(t *testing.T) {
	w := newWaiters()
	get := func(ctx context.Context, key string) (*Call, error) {
		return &Call{Key: key, State: Running}, nil
	}
	res := make(chan error, 1)
	go func() {
		_, err := w.wait(context.Background(), "k", Running, get)
		res <- err
	}()
	w.close()
	select {
	case err := <-res:
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("wait on a closed ledger = %v; want ErrUnavailable", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("close did not release the waiter")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.byKey) != 0 {
		t.Fatalf("waiters left registered: %v", w.byKey)
	}
}
