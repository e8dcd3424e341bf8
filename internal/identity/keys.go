package identity

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Storage keeps a generated key; Caddy's storage (certmagic.Storage)
// is one.
type Storage interface {
	Lock(ctx context.Context, name string) error
	Unlock(ctx context.Context, name string) error
	Load(ctx context.Context, key string) ([]byte, error)
	Store(ctx context.Context, key string, value []byte) error
}

// StoredKey returns the key kept in st under name, making and storing one
// the first time. The storage lock keeps two instances that share storage
// from making two keys.
func StoredKey(ctx context.Context, st Storage, name string) (Key, error) {
	var k Key
	err := LoadOrStore(ctx, st, name,
		func(data []byte) (err error) { k, err = ParsePEM(data); return err },
		func() ([]byte, error) {
			var err error
			if k, err = GenerateKey(); err != nil {
				return nil, err
			}
			return k.MarshalPEM()
		})
	return k, err
}

// LoadOrStore reads what st keeps under name with parse, or, the first
// time, stores what create gives (which create has read already), under the
// storage's lock: instances sharing a storage make one. It keeps any
// generated secret of the gateway's (the identity key, the connections'
// key).
func LoadOrStore(ctx context.Context, st Storage, name string, parse func([]byte) error, create func() ([]byte, error)) error {
	if err := st.Lock(ctx, name); err != nil {
		return fmt.Errorf("locking %s in storage: %w", name, err)
	}
	defer func() { _ = st.Unlock(ctx, name) }()
	data, err := st.Load(ctx, name)
	if err == nil {
		if err := parse(data); err != nil {
			return fmt.Errorf("%s in storage: %w", name, err)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("loading %s from storage: %w", name, err)
	}
	if data, err = create(); err != nil {
		return err
	}
	if err := st.Store(ctx, name, data); err != nil {
		return fmt.Errorf("storing %s: %w", name, err)
	}
	return nil
}

// ReadKeyFile reads a PEM file holding a PKCS #8 Ed25519 private key.
func ReadKeyFile(path string) (Key, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Key{}, err
	}
	k, err := ParsePEM(data)
	if err != nil {
		return Key{}, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// KeyFile is a named key file, for rotation.
type KeyFile struct{ ID, Path string }

// ReadKeyFiles reads named keys, each with its name as kid: the one named
// signing signs (the only one, when signing is empty), and the others are
// still published, so that the tokens they signed keep verifying.
func ReadKeyFiles(files []KeyFile, signing string) (Key, []Key, error) {
	if signing == "" {
		if len(files) > 1 {
			return Key{}, nil, errors.New("several keys are configured: name the one that signs with signing_key")
		}
		signing = files[0].ID
	}
	var (
		key    Key
		found  bool
		others []Key
		seen   = map[string]bool{}
	)
	for _, f := range files {
		if f.ID == "" || f.Path == "" {
			return Key{}, nil, errors.New("each key needs an id and a file")
		}
		if seen[f.ID] {
			return Key{}, nil, fmt.Errorf("key id %q is used twice", f.ID)
		}
		seen[f.ID] = true
		k, err := ReadKeyFile(f.Path)
		if err != nil {
			return Key{}, nil, fmt.Errorf("key %q: %w", f.ID, err)
		}
		k.ID = f.ID
		if f.ID == signing {
			key, found = k, true
		} else {
			others = append(others, k)
		}
	}
	if !found {
		return Key{}, nil, fmt.Errorf("signing_key %q is not among the keys", signing)
	}
	return key, others, nil
}
