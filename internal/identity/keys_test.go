package identity

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func writeKey(t *testing.T, dir, name string) (string, Key) {
	t.Helper()
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	data, err := k.MarshalPEM()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, k
}

func TestReadKeyFiles(t *testing.T) {
	dir := t.TempDir()
	a, ka := writeKey(t, dir, "a.pem")
	b, kb := writeKey(t, dir, "b.pem")
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		files   []KeyFile
		signing string
		signer  Key
		others  int
		err     string
	}{
		{"one key signs", []KeyFile{{"k1", a}}, "", ka, 0, ""},
		{"named signer, one published beside", []KeyFile{{"k1", a}, {"k2", b}}, "k2", kb, 1, ""},
		{"several without a signer", []KeyFile{{"k1", a}, {"k2", b}}, "", Key{}, 0, "name the one that signs with signing_key"},
		{"signer not among them", []KeyFile{{"k1", a}}, "k9", Key{}, 0, `signing_key "k9" is not among the keys`},
		{"id used twice", []KeyFile{{"k1", a}, {"k1", b}}, "k1", Key{}, 0, `key id "k1" is used twice`},
		{"no id", []KeyFile{{"", a}}, "k1", Key{}, 0, "each key needs an id and a file"},
		{"no file", []KeyFile{{"k1", ""}}, "", Key{}, 0, "each key needs an id and a file"},
		{"missing file", []KeyFile{{"k1", filepath.Join(dir, "nope.pem")}}, "", Key{}, 0, `key "k1": open`},
		{"not a key", []KeyFile{{"k1", junk}}, "", Key{}, 0, `key "k1": ` + junk},
	} {
		t.Run(c.name, func(t *testing.T) {
			signer, others, err := ReadKeyFiles(c.files, c.signing)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !signer.Private.Equal(c.signer.Private) || len(others) != c.others {
				t.Errorf("signer %s, %d others; want the expected signer and %d others", signer.ID, len(others), c.others)
			}
			if signer.ID == "" || signer.ID == c.signer.ID {
				t.Errorf("signer kid %q, want the configured name", signer.ID)
			}
		})
	}
}

// mapStorage is a Storage in memory, counting locks.
type mapStorage struct {
	mu     sync.Mutex
	data   map[string][]byte
	locked map[string]bool
	fail   error
}

func (s *mapStorage) Lock(_ context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.locked[name] {
		return errors.New("already locked")
	}
	s.locked[name] = true
	return nil
}

func (s *mapStorage) Unlock(_ context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.locked, name)
	return nil
}

func (s *mapStorage) Load(_ context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	v, ok := s.data[key]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return v, nil
}

func (s *mapStorage) Store(_ context.Context, key string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data[key] = value
	return nil
}

// The first load makes and keeps a key; later loads read the same one;
// a damaged or unreadable stored key is an error, never a new key.
func TestStoredKey(t *testing.T) {
	ctx := context.Background()
	st := &mapStorage{data: map[string][]byte{}, locked: map[string]bool{}}
	k1, err := StoredKey(ctx, st, "toolgate/k.pem")
	if err != nil {
		t.Fatal(err)
	}
	k2, err := StoredKey(ctx, st, "toolgate/k.pem")
	if err != nil {
		t.Fatal(err)
	}
	if !k1.Private.Equal(k2.Private) || k1.ID != k2.ID {
		t.Error("a second load made another key")
	}
	if len(st.locked) != 0 {
		t.Error("the lock was not released")
	}
	st.data["toolgate/k.pem"] = []byte("damaged")
	if _, err := StoredKey(ctx, st, "toolgate/k.pem"); err == nil || !strings.Contains(err.Error(), "toolgate/k.pem in storage") {
		t.Errorf("damaged key: %v", err)
	}
	st.fail = errors.New("disk on fire")
	if _, err := StoredKey(ctx, st, "toolgate/k.pem"); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("unreadable storage: %v", err)
	}
	st.fail, st.locked["toolgate/k.pem"] = nil, true
	if _, err := StoredKey(ctx, st, "toolgate/k.pem"); err == nil || !strings.Contains(err.Error(), "locking") {
		t.Errorf("locked: %v", err)
	}
}
