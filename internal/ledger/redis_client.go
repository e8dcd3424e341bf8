package ledger

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Client is the ledger's Redis client, for other state that gateway
// instances share on the same server (the client tool bridge). It stays
// the ledger's: Close closes it.
func (r *Redis) Client() *redis.Client { return r.client }

// Prefix starts the ledger's keys and channel; state shared beside it is
// keyed under it too, so gateways with another prefix never meet.
func (r *Redis) Prefix() string { return r.prefix }

// Subscribe subscribes client to channel and reads the server's
// confirmation, so that nothing published once it returns can be missed.
// The ledger and the client tool bridge each keep one such subscription.
func Subscribe(ctx context.Context, client *redis.Client, channel string) (*redis.PubSub, error) {
	ps := client.Subscribe(ctx, channel)
	msg, err := ps.Receive(ctx)
	if err == nil {
		if _, ok := msg.(*redis.Subscription); !ok {
			err = fmt.Errorf("unexpected %T while subscribing", msg)
		}
	}
	if err != nil {
		_ = ps.Close()
		return nil, err
	}
	return ps, nil
}
