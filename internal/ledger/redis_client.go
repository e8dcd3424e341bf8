package ledger

import "github.com/redis/go-redis/v9"

// Client is the ledger's Redis client, for other state that gateway
// instances share on the same server (the client tool bridge). It stays
// the ledger's: Close closes it.
func (r *Redis) Client() *redis.Client { return r.client }

// Prefix starts the ledger's keys and channel; state shared beside it is
// keyed under it too, so gateways with another prefix never meet.
func (r *Redis) Prefix() string { return r.prefix }
