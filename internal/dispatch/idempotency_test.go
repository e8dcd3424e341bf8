package dispatch

import (
	"crypto/sha256"
	"encoding/base64"
	"testing"
)

func TestIdempotencyKey(t *testing.T) {
	// The definition, written out for one call: a component can compute it.
	msg := "\x00\x00\x00\x05alice\x00\x00\x00\x04in_1\x00\x00\x00\x07order-1"
	sum := sha256.Sum256([]byte(msg))
	if got, want := IdempotencyKey("alice", "in_1", "order-1"), base64.RawURLEncoding.EncodeToString(sum[:]); got != want {
		t.Fatalf("IdempotencyKey = %s, want %s", got, want)
	}
	if got := IdempotencyKey("alice", "in_1", "order-1"); len(got) != 43 {
		t.Errorf("%q is not 43 base64url characters", got)
	}
	// Distinct wherever one value differs, or a boundary moves.
	seen := map[string][3]string{}
	for _, c := range [][3]string{
		{"alice", "in_1", "order-1"},
		{"bob", "in_1", "order-1"},
		{"alice", "in_2", "order-1"},
		{"alice", "in_1", "order-2"},
		{"alice", "", "order-1"},
		{"alicein_1", "", "order-1"},
		{"alice", "in_1order-1", ""},
		{"", "alice", "in_1order-1"},
		{"alice\x00\x00\x00\x04in_1", "", "order-1"},
	} {
		k := IdempotencyKey(c[0], c[1], c[2])
		if prev, dup := seen[k]; dup {
			t.Errorf("%q and %q have one key", prev, c)
		}
		seen[k] = c
	}
}
