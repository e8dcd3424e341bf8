package caddymodule

import (
	"errors"
	"fmt"

	"github.com/caddyserver/caddy/v2"

	"github.com/toolgate/toolgate/internal/identity"
)

// storageKey is where a generated identity key is kept in Caddy's storage.
const storageKey = "toolgate/identity/ed25519.pem"

// loadKeys returns the signing key and the keys still published beside it:
// the key file, the named keys, or a key generated once and kept in Caddy's
// storage. Key file paths may hold placeholders, resolved with repl.
func loadKeys(ctx caddy.Context, repl *caddy.Replacer, c *Identity) (identity.Key, []identity.Key, error) {
	if len(c.Keys) == 0 {
		if c.SigningKey != "" {
			return identity.Key{}, nil, errors.New("signing_key names a key, but no keys are configured")
		}
		path, err := resolve(repl, "key_file", c.KeyFile)
		if err != nil {
			return identity.Key{}, nil, err
		}
		var k identity.Key
		if path != "" {
			k, err = identity.ReadKeyFile(path)
		} else {
			k, err = identity.StoredKey(ctx, ctx.Storage(), storageKey)
		}
		return k, nil, err
	}
	if c.KeyFile != "" {
		return identity.Key{}, nil, errors.New("set key_file or keys, not both")
	}
	files := make([]identity.KeyFile, len(c.Keys))
	for i, kc := range c.Keys {
		path, err := resolve(repl, fmt.Sprintf("key %q: file", kc.ID), kc.File)
		if err != nil {
			return identity.Key{}, nil, err
		}
		files[i] = identity.KeyFile{ID: kc.ID, Path: path}
	}
	return identity.ReadKeyFiles(files, c.SigningKey)
}
