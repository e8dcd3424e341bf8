package store

import (
	"context"
	"errors"
	"time"

	"github.com/toolgate/toolgate/internal/connect"
)

// errUnavailable is every answer of the connections beside a bolt ledger
// that is not open yet: the file that would hold them is another's.
var errUnavailable = errors.New("connections: the ledger file is not open (another process or config holds it)")

// unavailable is the connections' store beside a bolt ledger opened
// later (ledger.Later), whose file another held at Open: it keeps nothing
// and fails every call. Unlike the ledger it does not open once the file
// is free: Later does not say when, nor hand out the file; the store
// opened again (the next config that changes the ledger) has it.
type unavailable struct{}

func (unavailable) Get(context.Context, string) ([]byte, error) { return nil, errUnavailable }
func (unavailable) Put(context.Context, string, []byte, time.Duration) error {
	return errUnavailable
}
func (unavailable) Delete(context.Context, string) error         { return errUnavailable }
func (unavailable) Take(context.Context, string) ([]byte, error) { return nil, errUnavailable }
func (unavailable) Lock(context.Context, string, time.Duration) (func(), bool, error) {
	return nil, false, errUnavailable
}
func (unavailable) Close() error { return nil }

// Interface guards
var _ connect.Store = unavailable{}
