package store

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.etcd.io/bbolt"

	"github.com/toolgate/toolgate/internal/connect"
	"github.com/toolgate/toolgate/internal/ledger"
)

// errUnavailable is every answer of the connections beside a bolt ledger
// that is not open yet: the file that would hold them is another's.
var errUnavailable = errors.New("connections: the ledger file is not open yet (another process or config holds it)")

// later is the connections' store beside a bolt ledger opened later
// (ledger.Later), whose file another held at Open: it fails every call
// until the ledger has opened, then keeps the connections in its file as
// the local store does.
type later struct {
	ledger *ledger.Later
	mu     sync.Mutex
	bolt   *connect.Bolt // once the ledger opened
	closed bool
}

// store is the bolt store once the ledger is open.
func (s *later) store() (connect.Store, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bolt != nil {
		return s.bolt, nil
	}
	l, ok := s.ledger.Opened()
	if !ok || s.closed {
		return nil, errUnavailable
	}
	file, ok := l.(interface{ DB() *bbolt.DB })
	if !ok {
		return nil, errUnavailable
	}
	b, err := connect.NewBolt(file.DB(), nil)
	if err != nil {
		return nil, err
	}
	s.bolt = b
	return b, nil
}

func (s *later) Get(ctx context.Context, key string) ([]byte, error) {
	st, err := s.store()
	if err != nil {
		return nil, err
	}
	return st.Get(ctx, key)
}

func (s *later) Put(ctx context.Context, key string, val []byte, ttl time.Duration) error {
	st, err := s.store()
	if err != nil {
		return err
	}
	return st.Put(ctx, key, val, ttl)
}

func (s *later) Delete(ctx context.Context, key string) error {
	st, err := s.store()
	if err != nil {
		return err
	}
	return st.Delete(ctx, key)
}

func (s *later) Take(ctx context.Context, key string) ([]byte, error) {
	st, err := s.store()
	if err != nil {
		return nil, err
	}
	return st.Take(ctx, key)
}

func (s *later) Lock(ctx context.Context, key string, ttl time.Duration) (func(), bool, error) {
	st, err := s.store()
	if err != nil {
		return nil, false, err
	}
	return st.Lock(ctx, key, ttl)
}

func (s *later) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.bolt != nil {
		return s.bolt.Close()
	}
	return nil
}

// Interface guards
var _ connect.Store = (*later)(nil)
