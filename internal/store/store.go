// Package store opens the gateway's shared state as one thing on one back
// end: the call ledger and the relay on which client tool calls meet their
// pages, opened together from the ledger's config and closed together.
//
// The local store is the bolt ledger (or none, for "ledger off") beside
// the in-process relay: one gateway instance. The Redis store is the Redis
// ledger and the Redis relay on one go-redis client: every instance on the
// same server and prefix shares both. A new back end is a Ledger that
// passes ledgertest's suite and a clienttools Relay that passes the relay
// suite, put together here.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/clienttools"
	"github.com/toolgate/toolgate/internal/ledger"
)

// Store is the ledger and the client tools' relay of one back end.
type Store struct {
	ledger ledger.Ledger
	relay  clienttools.Relay
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
		return Local(l), nil
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
	return &Store{ledger: cfg.Limit(r), relay: relay}, nil
}

// Local returns the local store of l: l beside an in-process relay.
func Local(l ledger.Ledger) *Store {
	return &Store{ledger: l, relay: clienttools.NewLocalRelay()}
}

// Ledger returns the store's ledger. Its Records says whether it keeps
// calls at all.
func (s *Store) Ledger() ledger.Ledger { return s.ledger }

// Relay returns the store's relay, for one bridge (clienttools.NewBridgeOn).
func (s *Store) Relay() clienttools.Relay { return s.relay }

// Close closes the relay, then the ledger: the Redis relay uses the
// ledger's client.
func (s *Store) Close() error {
	return errors.Join(s.relay.Close(), s.ledger.Close())
}
