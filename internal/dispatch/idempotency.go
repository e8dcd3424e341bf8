package dispatch

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
)

// IdempotencyKey is the Idempotency-Key toolgate sends an app target for
// a call: the unpadded base64url of SHA-256 over the user, the
// installation and the call id, each preceded by its length in bytes as a
// 4-byte big-endian integer. A call id is the caller's choice, so two users
// (or two installations with the same user id) may send the same one; the
// key is the same for the same call, and differs across users and
// installations, so that a component's idempotency middleware never
// replays one user's answer to another. A card button's call id is the
// call's id, "/" and the button's id.
func IdempotencyKey(user, install, callID string) string {
	h := sha256.New()
	var n [4]byte
	for _, s := range [...]string{user, install, callID} {
		binary.BigEndian.PutUint32(n[:], uint32(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	var sum [sha256.Size]byte
	return base64.RawURLEncoding.EncodeToString(h.Sum(sum[:0]))
}
