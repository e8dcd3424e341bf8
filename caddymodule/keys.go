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

// loadKeys returns the signing key and the keys still published beside it.
// Key file paths may hold placeholders, resolved with repl.
func loadKeys(ctx caddy.Context, repl *caddy.Replacer, c *Identity) (identity.Key, []identity.Key, error) {
	if len(c.Keys) == 0 {
		if c.SigningKey != "" {
			return identity.Key{}, nil, errors.New("signing_key names a key, but no keys are configured")
		}
		path, err := resolve(repl, "key_file", c.KeyFile)
		if err != nil {
			return identity.Key{}, nil, err
		}
		k, err := loadKey(ctx, path)
		return k, nil, err
	}
	if c.KeyFile != "" {
		return identity.Key{}, nil, errors.New("set key_file or keys, not both")
	}
	signing := c.SigningKey
	if signing == "" {
		if len(c.Keys) > 1 {
			return identity.Key{}, nil, errors.New("several keys are configured: name the one that signs with signing_key")
		}
		signing = c.Keys[0].ID
	}
	var (
		key    identity.Key
		found  bool
		others []identity.Key
		seen   = map[string]bool{}
	)
	for _, kc := range c.Keys {
		if kc.ID == "" || kc.File == "" {
			return identity.Key{}, nil, errors.New("each key needs an id and a file")
		}
		if seen[kc.ID] {
			return identity.Key{}, nil, fmt.Errorf("key id %q is used twice", kc.ID)
		}
		seen[kc.ID] = true
		path, err := resolve(repl, fmt.Sprintf("key %q: file", kc.ID), kc.File)
		if err != nil {
			return identity.Key{}, nil, err
		}
		k, err := loadKey(ctx, path)
		if err != nil {
			return identity.Key{}, nil, fmt.Errorf("key %q: %w", kc.ID, err)
		}
		k.ID = kc.ID
		if kc.ID == signing {
			key, found = k, true
		} else {
			others = append(others, k)
		}
	}
	if !found {
		return identity.Key{}, nil, fmt.Errorf("signing_key %q is not among the keys", signing)
	}
	return key, others, nil
}

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
