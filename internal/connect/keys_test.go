package connect_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/connect"
)

func newKey(t *testing.T) connect.Key {
	t.Helper()
	k, err := connect.ParseKey(connect.GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpen(t *testing.T) {
	k := newKey(t)
	keys, err := connect.NewKeys(k)
	if err != nil {
		t.Fatal(err)
	}
	plain := []byte(`{"access":"at_secret"}`)
	sealed := keys.Seal(plain, []byte("token\x1fgmail\x1falice\x1fin_1"))
	if bytes.Contains(sealed, []byte("at_secret")) {
		t.Fatal("the sealed value holds the token in clear text")
	}
	if !bytes.HasPrefix(sealed, []byte("tgc1."+k.ID+".")) {
		t.Fatalf("sealed value %q does not name its key %s", sealed[:20], k.ID)
	}
	got, err := keys.Open(sealed, []byte("token\x1fgmail\x1falice\x1fin_1"))
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if again := keys.Seal(plain, []byte("x")); bytes.Equal(again, keys.Seal(plain, []byte("x"))) {
		t.Fatal("two seals of one value are equal: the nonce is not fresh")
	}

	// Moved to another user's place, damaged, or sealed by a key not
	// configured: it does not open.
	if _, err := keys.Open(sealed, []byte("token\x1fgmail\x1fmallory\x1fin_1")); !errors.Is(err, connect.ErrSealed) {
		t.Fatalf("opened under another place: %v", err)
	}
	bad := bytes.Clone(sealed)
	bad[len(bad)-3] ^= 1
	if _, err := keys.Open(bad, []byte("token\x1fgmail\x1falice\x1fin_1")); !errors.Is(err, connect.ErrSealed) {
		t.Fatalf("opened a damaged value: %v", err)
	}
	other, _ := connect.NewKeys(newKey(t))
	if _, err := other.Open(sealed, []byte("token\x1fgmail\x1falice\x1fin_1")); !errors.Is(err, connect.ErrSealed) || !strings.Contains(err.Error(), k.ID) {
		t.Fatalf("another key opened it, or the error does not name the key: %v", err)
	}
	for _, junk := range []string{"", "tgc1.", "tgc1.x", "plain", "tgc1." + k.ID + ".!!"} {
		if _, err := keys.Open([]byte(junk), nil); !errors.Is(err, connect.ErrSealed) {
			t.Fatalf("Open(%q) = %v, want ErrSealed", junk, err)
		}
	}
}

// TestRotation: a new key seals; the old one, kept beside it, still opens
// what it sealed; dropped, it does not.
func TestRotation(t *testing.T) {
	old, next := newKey(t), newKey(t)
	before, _ := connect.NewKeys(old)
	sealed := before.Seal([]byte("v"), nil)
	rotated, err := connect.NewKeys(next, old)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rotated.Open(sealed, nil); err != nil || string(got) != "v" {
		t.Fatalf("the old key kept does not open: %q, %v", got, err)
	}
	if !bytes.Contains(rotated.Seal([]byte("v"), nil), []byte(next.ID)) || rotated.CurrentID() != next.ID {
		t.Fatal("the new key does not seal")
	}
	dropped, _ := connect.NewKeys(next)
	if _, err := dropped.Open(sealed, nil); !errors.Is(err, connect.ErrSealed) {
		t.Fatalf("opened without its key: %v", err)
	}
	if _, err := connect.NewKeys(old, old); err == nil {
		t.Fatal("a key given twice was accepted")
	}
}

func TestReadKeyFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "conn.key")
	if err := os.WriteFile(good, connect.GenerateKey(), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := connect.ReadKeyFile(good); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short.key")
	if err := os.WriteFile(short, []byte("c2VjcmV0LXRleHQ=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := connect.ReadKeyFile(short)
	if err == nil || !strings.Contains(err.Error(), short) || strings.Contains(err.Error(), "c2VjcmV0") {
		t.Fatalf("a short key: %v (want the file named, its text not)", err)
	}
}
