package connect

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// KeySize is the size of a connection key: AES-256.
const KeySize = 32

// Key is one AES-256-GCM key that seals connections' tokens, and its id:
// the first 8 bytes of SHA-256 over a label and the key, in hex, which
// says which key sealed a value and reveals nothing of it.
type Key struct {
	ID   string
	aead cipher.AEAD
}

// NewKey makes a Key of KeySize raw bytes.
func NewKey(raw []byte) (Key, error) {
	if len(raw) != KeySize {
		return Key{}, fmt.Errorf("a connection key is %d bytes, not %d", KeySize, len(raw))
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return Key{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return Key{}, err
	}
	sum := sha256.Sum256(append([]byte("toolgate connection key\x00"), raw...))
	return Key{ID: hex.EncodeToString(sum[:8]), aead: aead}, nil
}

// GenerateKey returns a new random key as a key file holds it.
func GenerateKey() []byte {
	raw := make([]byte, KeySize)
	_, _ = rand.Read(raw) // crypto/rand never fails
	return []byte(base64.StdEncoding.EncodeToString(raw) + "\n")
}

// ParseKey reads a key as a key file holds it: KeySize bytes in standard
// base64 (head -c 32 /dev/urandom | base64), surrounding space ignored.
func ParseKey(text []byte) (Key, error) {
	raw, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(text)))
	if err != nil {
		return Key{}, fmt.Errorf("a connection key is %d bytes in base64: %v", KeySize, err)
	}
	return NewKey(raw)
}

// ReadKeyFile reads a key file (ParseKey). The error names the file,
// never its text.
func ReadKeyFile(path string) (Key, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return Key{}, err
	}
	k, err := ParseKey(text)
	if err != nil {
		return Key{}, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// Keys seal with the current key and open with any of them: an old key
// kept beside a new one opens what it sealed until every value is sealed
// again (a token is, each time it refreshes).
type Keys struct {
	current Key
	byID    map[string]Key
}

// NewKeys returns current and the older keys that still open values.
func NewKeys(current Key, older ...Key) (*Keys, error) {
	if current.aead == nil {
		return nil, errors.New("no current connection key")
	}
	k := &Keys{current: current, byID: map[string]Key{current.ID: current}}
	for _, o := range older {
		if _, dup := k.byID[o.ID]; dup {
			return nil, fmt.Errorf("connection key %s is given twice", o.ID)
		}
		k.byID[o.ID] = o
	}
	return k, nil
}

// sealedPrefix starts every sealed value: a version, then the key id.
const sealedPrefix = "tgc1."

// Seal encrypts plain bound to aad (the value's place: who it is for), so
// that a value moved to another place does not open there. The result is
// sealedPrefix, the key id, ".", then nonce and ciphertext in base64url.
func (k *Keys) Seal(plain, aad []byte) []byte {
	a := k.current.aead
	nonce := make([]byte, a.NonceSize(), a.NonceSize()+len(plain)+a.Overhead())
	_, _ = rand.Read(nonce)
	sealed := a.Seal(nonce, nonce, plain, aad)
	out := make([]byte, 0, len(sealedPrefix)+len(k.current.ID)+1+base64.RawURLEncoding.EncodedLen(len(sealed)))
	out = append(out, sealedPrefix...)
	out = append(out, k.current.ID...)
	out = append(out, '.')
	return base64.RawURLEncoding.AppendEncode(out, sealed)
}

// ErrSealed is a value that does not open: sealed by a key no longer
// configured, damaged, or moved from another place.
var ErrSealed = errors.New("the sealed value does not open")

// ErrUnknownKey is a value sealed by a key this process does not have
// (ErrSealed too): dropped from its config, or added to another
// instance's first, during a rolling change of keys.
var ErrUnknownKey = fmt.Errorf("%w: its key is not configured here", ErrSealed)

// Open decrypts a value Seal made with any of the keys and the same aad.
func (k *Keys) Open(sealed, aad []byte) ([]byte, error) {
	rest, ok := bytes.CutPrefix(sealed, []byte(sealedPrefix))
	if !ok {
		return nil, ErrSealed
	}
	id, body, ok := strings.Cut(string(rest), ".")
	if !ok {
		return nil, ErrSealed
	}
	key, ok := k.byID[id]
	if !ok {
		return nil, fmt.Errorf("%w (key %s)", ErrUnknownKey, id)
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(body) // one spelling per value
	if err != nil || len(raw) < key.aead.NonceSize() {
		return nil, ErrSealed
	}
	n := key.aead.NonceSize()
	plain, err := key.aead.Open(nil, raw[:n], raw[n:], aad)
	if err != nil {
		return nil, ErrSealed
	}
	return plain, nil
}

// CurrentID is the id of the key values are sealed with now.
func (k *Keys) CurrentID() string { return k.current.ID }
