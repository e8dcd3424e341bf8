package connect

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/clock"
)

// ErrNotFound is a key the store does not hold (or holds no longer: its
// time ran out).
var ErrNotFound = errors.New("connect: not found")

// Store keeps the connections' sealed values: tokens, and the flows in
// progress. Keys are opaque strings the Manager makes. Implementations
// are safe for concurrent use, and across processes where the back end
// is shared (Redis).
type Store interface {
	// Get returns the value under key, or ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// Put stores val under key; with ttl > 0 it is gone after ttl.
	Put(ctx context.Context, key string, val []byte, ttl time.Duration) error
	// Delete removes key; a missing key is no error.
	Delete(ctx context.Context, key string) error
	// Take returns the value under key and removes it in one step: of
	// two Takes of one key, one gets the value and the other ErrNotFound.
	Take(ctx context.Context, key string) ([]byte, error)
	// Lock takes the lock named key for at most ttl, for one holder
	// across every process on the store; ok is false when another holds
	// it. unlock releases it if it is still this holder's.
	Lock(ctx context.Context, key string, ttl time.Duration) (unlock func(), ok bool, err error)
	// Close releases what the store holds of its own (not a back end it
	// shares with the ledger).
	Close() error
}

// Memory is a Store in this process's memory: the store beside "ledger
// off", whose tokens last as long as the process.
type Memory struct {
	clock clock.Clock
	mu    sync.Mutex
	vals  map[string]memValue
	locks locks
}

type memValue struct {
	val     []byte
	expires time.Time // zero: never
}

// NewMemory returns an empty Memory on c (nil: the system clock).
func NewMemory(c clock.Clock) *Memory {
	return &Memory{clock: clock.Or(c), vals: map[string]memValue{}, locks: locks{held: map[string]holding{}}}
}

func (m *Memory) live(key string) (memValue, bool) {
	v, ok := m.vals[key]
	if ok && !v.expires.IsZero() && !m.clock.Now().Before(v.expires) {
		delete(m.vals, key)
		return memValue{}, false
	}
	return v, ok
}

func (m *Memory) Get(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.live(key)
	if !ok {
		return nil, ErrNotFound
	}
	return bytes.Clone(v.val), nil
}

func (m *Memory) Put(_ context.Context, key string, val []byte, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := memValue{val: bytes.Clone(val)}
	if ttl > 0 {
		v.expires = m.clock.Now().Add(ttl)
	}
	m.vals[key] = v
	return nil
}

func (m *Memory) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.vals, key)
	return nil
}

func (m *Memory) Take(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.live(key)
	if !ok {
		return nil, ErrNotFound
	}
	delete(m.vals, key)
	return v.val, nil
}

func (m *Memory) Lock(_ context.Context, key string, ttl time.Duration) (func(), bool, error) {
	unlock, ok := m.locks.lock(key, m.clock.Now(), ttl)
	return unlock, ok, nil
}

func (m *Memory) Close() error { return nil }

var _ Store = (*Memory)(nil)

// locks are the locks of one process (Memory's and Bolt's), each held
// until its holder unlocks it or its ttl ends.
type locks struct {
	mu   sync.Mutex
	held map[string]holding
}

type holding struct {
	token   *byte // this holding's: an unlock of an earlier one is a no-op
	expires time.Time
}

func (l *locks) lock(key string, now time.Time, ttl time.Duration) (unlock func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h, held := l.held[key]; held && now.Before(h.expires) {
		return nil, false
	}
	token := new(byte)
	l.held[key] = holding{token: token, expires: now.Add(ttl)}
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.held[key].token == token {
			delete(l.held, key)
		}
	}, true
}

// sweep forgets the locks whose ttl ended by now, unlocked or not.
func (l *locks) sweep(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for key, h := range l.held {
		if !now.Before(h.expires) {
			delete(l.held, key)
		}
	}
}
