// Package store opens the gateway's shared state as one thing on one back
// end: the call ledger, the relay on which client tool calls meet their
// pages and the connections' store of tokens, opened together from the
// ledger's config and closed together.
//
// The local store is the bolt ledger beside the in-process relay, its
// connections in a bucket of the ledger's file: one gateway instance.
// With "ledger off" the connections are kept in memory, for as long as
// the process runs. The Redis store is the Redis ledger, the Redis relay
// and the connections on one go-redis client: every instance on the same
// server and prefix shares all three. A new back end is a Ledger that
// passes ledgertest's suite, a clienttools Relay that passes the relay
// suite and a connect.Store that passes connecttest's, put together here.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/bbolt"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/clienttools"
	"github.com/toolgate/toolgate/internal/connect"
	"github.com/toolgate/toolgate/internal/ledger"
)

// Store is the ledger, the client tools' relay and the connections' store
// of one back end.
type Store struct {
	ledger      ledger.Ledger
	relay       clienttools.Relay
	connections connect.Store
}

// relayOpenTimeout bounds the Redis relay's first subscription.
const relayOpenTimeout = 10 * time.Second

// Open opens the store cfg configures, once cfg.Check passed: for "redis"
// the Redis store, else the local one. logger (nil for none) is the
// ledger's and the relay's.
func Open(cfg *ledger.Config, logger *zap.Logger) (*Store, error) {
	if cfg.Backend != "redis" {
		l, err := cfg.Open(logger)
		if err != nil {
			return nil, err
		}
		s, err := Local(l)
		if err != nil {
			_ = l.Close()
			return nil, err
		}
		return s, nil
	}
	r, err := cfg.OpenRedis(logger)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), relayOpenTimeout)
	defer cancel()
	relay, err := clienttools.NewRedisRelay(ctx, r.Client(), r.Prefix(), logger)
	if err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("ledger redis %s: %w", cfg.Addr, err)
	}
	return &Store{ledger: cfg.Limit(r), relay: relay, connections: connect.NewRedis(r.Client(), r.Prefix())}, nil
}

// Local returns the local store of l: l beside an in-process relay, and
// the connections in l's bolt file, or in memory when l keeps nothing
// (ledger off). It fails if the connections' bucket cannot be made.
func Local(l ledger.Ledger) (*Store, error) {
	conns, err := localConnections(l)
	if err != nil {
		return nil, err
	}
	return &Store{ledger: l, relay: clienttools.NewLocalRelay(), connections: conns}, nil
}

// localConnections is the connections' store beside l: in its bolt file,
// which the bolt ledger shares (DB); in memory beside a ledger that keeps
// nothing; and beside a ledger whose file another held at Open (Later),
// one that fails every call until the ledger opens (later).
func localConnections(l ledger.Ledger) (connect.Store, error) {
	if !l.Records() {
		return connect.NewMemory(nil), nil
	}
	switch b := ledger.Backend(l).(type) {
	case interface{ DB() *bbolt.DB }:
		return connect.NewBolt(b.DB(), nil)
	case *ledger.Later:
		return &later{ledger: b}, nil
	}
	return nil, fmt.Errorf("store: no connections store beside a %T ledger", ledger.Backend(l))
}

// Ledger returns the store's ledger. Its Records says whether it keeps
// calls at all.
func (s *Store) Ledger() ledger.Ledger { return s.ledger }

// Relay returns the store's relay, for one bridge (clienttools.NewBridgeOn).
func (s *Store) Relay() clienttools.Relay { return s.relay }

// Connections returns the store of the connections' tokens and flows.
func (s *Store) Connections() connect.Store { return s.connections }

// Close closes the connections' store and the relay, then the ledger:
// they use the ledger's client or file.
func (s *Store) Close() error {
	return errors.Join(s.connections.Close(), s.relay.Close(), s.ledger.Close())
}
