package caddymodule

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/caddyserver/caddy/v2"

	"github.com/toolgate/toolgate/internal/identity"
)

// storageKey is where a generated identity key is kept in Caddy's storage.
const storageKey = "toolgate/identity/ed25519.pem"

// loadKey reads the key file, or the key kept in Caddy's storage, making
// and storing one the first time. The storage lock keeps two instances that
// share storage from making two keys.
func loadKey(ctx caddy.Context, keyFile string) (identity.Key, error) {
	if keyFile != "" {
		data, err := os.ReadFile(keyFile)
		if err != nil {
			return identity.Key{}, err
		}
		k, err := identity.ParsePEM(data)
		if err != nil {
			return identity.Key{}, fmt.Errorf("%s: %w", keyFile, err)
		}
		return k, nil
	}
	st := ctx.Storage()
	if err := st.Lock(ctx, storageKey); err != nil {
		return identity.Key{}, fmt.Errorf("locking %s in storage: %w", storageKey, err)
	}
	defer func() { _ = st.Unlock(ctx, storageKey) }()
	data, err := st.Load(ctx, storageKey)
	if err == nil {
		k, err := identity.ParsePEM(data)
		if err != nil {
			return identity.Key{}, fmt.Errorf("%s in storage: %w", storageKey, err)
		}
		return k, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return identity.Key{}, fmt.Errorf("loading %s from storage: %w", storageKey, err)
	}
	k, err := identity.GenerateKey()
	if err != nil {
		return identity.Key{}, err
	}
	pemData, err := k.MarshalPEM()
	if err != nil {
		return identity.Key{}, err
	}
	if err := st.Store(ctx, storageKey, pemData); err != nil {
		return identity.Key{}, fmt.Errorf("storing %s: %w", storageKey, err)
	}
	return k, nil
}
