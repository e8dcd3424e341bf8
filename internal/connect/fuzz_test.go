package connect_test

import (
	"bytes"
	"testing"

	"github.com/toolgate/toolgate/internal/connect"
)

// FuzzOpen: a value read back from the store opens only as what was
// sealed in its place; any other bytes, however close, are ErrSealed and
// never a panic.
func FuzzOpen(f *testing.F) {
	key, err := connect.ParseKey(connect.GenerateKey())
	if err != nil {
		f.Fatal(err)
	}
	keys, _ := connect.NewKeys(key)
	sealed := keys.Seal([]byte(`{"access":"at_1"}`), []byte("token\x1fmail\x1falice\x1fin_1"))
	f.Add(sealed, []byte("token\x1fmail\x1falice\x1fin_1"))
	f.Add([]byte("tgc1."+key.ID+"."), []byte(""))
	f.Add([]byte("tgc1."), []byte("x"))
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, value, place []byte) {
		plain, err := keys.Open(value, place)
		if err != nil {
			return
		}
		// Only the sealed value opens, and only in its place.
		if !bytes.Equal(value, sealed) || string(place) != "token\x1fmail\x1falice\x1fin_1" || string(plain) != `{"access":"at_1"}` {
			t.Fatalf("Open(%q, %q) = %q: opened what was not sealed there", value, place, plain)
		}
	})
}
