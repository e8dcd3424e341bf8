// Package identity issues the short-lived tokens that tell an app component
// who the user is, and publishes the public keys that verify them.
package identity

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-json-experiment/json"
	"github.com/golang-jwt/jwt/v5"

	"github.com/toolgate/toolgate/internal/clock"
)

// DefaultTTL is how long an identity token lives.
const DefaultTTL = 5 * time.Minute

// Key is an Ed25519 signing key with its id.
type Key struct {
	// ID is the RFC 7638 thumbprint of the public key: stable for the key,
	// so a restart with the same key keeps the same kid.
	ID      string
	Private ed25519.PrivateKey
}

// NewKey wraps a private key and computes its id.
func NewKey(priv ed25519.PrivateKey) Key {
	return Key{ID: thumbprint(priv.Public().(ed25519.PublicKey)), Private: priv}
}

// GenerateKey makes a new random key.
func GenerateKey() (Key, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Key{}, err
	}
	return NewKey(priv), nil
}

// ParsePEM reads a PKCS #8 "PRIVATE KEY" PEM block holding an Ed25519 key.
func ParsePEM(data []byte) (Key, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return Key{}, errors.New("no PEM block found")
	}
	if block.Type != "PRIVATE KEY" {
		return Key{}, fmt.Errorf("PEM block is %q, want \"PRIVATE KEY\" (PKCS #8)", block.Type)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return Key{}, err
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return Key{}, fmt.Errorf("key is %T, want an Ed25519 key", k)
	}
	return NewKey(priv), nil
}

// MarshalPEM encodes the key as a PKCS #8 PEM block.
func (k Key) MarshalPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k.Private)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// Public returns the key's public half.
func (k Key) Public() ed25519.PublicKey { return k.Private.Public().(ed25519.PublicKey) }

// thumbprint is the RFC 7638 thumbprint of pub, SHA-256 in base64url.
func thumbprint(pub ed25519.PublicKey) string {
	sum, err := (&jose.JSONWebKey{Key: pub}).Thumbprint(crypto.SHA256)
	if err != nil {
		// go-jose refuses only a malformed or low-order Ed25519 point, and
		// no key made from a private key is either.
		panic("identity: thumbprint of an Ed25519 key: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(sum)
}

// Claims are the claims of an identity token.
type Claims struct {
	Install string `json:"install,omitempty"`
	jwt.RegisteredClaims
}

// Issuer signs identity tokens. One key signs; older keys are kept only to
// be published in the JWKS while tokens they signed may still be in use.
type Issuer struct {
	issuer string
	ttl    time.Duration
	key    Key
	others []Key
	clock  clock.Clock

	mu    sync.Mutex
	cache map[tokenKey]cachedToken
}

type tokenKey struct{ user, install, audience string }

type cachedToken struct {
	token     string
	header    string // "Bearer " + token
	refreshAt time.Time
}

// maxCachedTokens bounds the token cache; past it, stale entries are swept
// and, if that is not enough, the cache starts over.
const maxCachedTokens = 10000

// NewIssuer returns an issuer signing with key and publishing others too;
// ttl <= 0 takes DefaultTTL.
func NewIssuer(issuer string, ttl time.Duration, key Key, others ...Key) *Issuer {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Issuer{issuer: issuer, ttl: ttl, key: key, others: others, clock: clock.Real, cache: map[tokenKey]cachedToken{}}
}

// SetClock replaces the clock, for tests.
func (i *Issuer) SetClock(c clock.Clock) { i.clock = clock.Or(c) }

// Token returns a token for user at install, addressed to the component
// named audience. A token is reused for the first three quarters of its
// lifetime, so a component always gets one with a quarter of its ttl left,
// and the gateway signs once per (user, install, component) per period
// instead of once per call.
func (i *Issuer) Token(user, install, audience string) (string, error) {
	c, err := i.cached(user, install, audience)
	return c.token, err
}

// Authorization is Token as the value of an Authorization header,
// "Bearer " and the token, cached with it.
func (i *Issuer) Authorization(user, install, audience string) (string, error) {
	c, err := i.cached(user, install, audience)
	return c.header, err
}

func (i *Issuer) cached(user, install, audience string) (cachedToken, error) {
	k := tokenKey{user, install, audience}
	now := i.clock.Now()
	i.mu.Lock()
	c, ok := i.cache[k]
	i.mu.Unlock()
	if ok && now.Before(c.refreshAt) {
		return c, nil
	}
	tok, err := i.sign(user, install, audience, now)
	if err != nil {
		return cachedToken{}, err
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if len(i.cache) >= maxCachedTokens {
		for key, e := range i.cache {
			if !now.Before(e.refreshAt) {
				delete(i.cache, key)
			}
		}
		if len(i.cache) >= maxCachedTokens {
			clear(i.cache)
		}
	}
	c = cachedToken{token: tok, header: "Bearer " + tok, refreshAt: now.Add(i.ttl * 3 / 4)}
	i.cache[k] = c
	return c, nil
}

// Sign signs a new token, bypassing the cache.
func (i *Issuer) Sign(user, install, audience string) (string, error) {
	return i.sign(user, install, audience, i.clock.Now())
}

func (i *Issuer) sign(user, install, audience string, at time.Time) (string, error) {
	now := at.Unix()
	// aud is the component's name as a single string (jwt.ClaimStrings
	// would write an array, and its switch is a package global).
	claims := jwt.MapClaims{
		"iss": i.issuer,
		"sub": user,
		"aud": audience,
		"iat": now,
		// Rounded up: a ttl under a second must not give exp == iat.
		"exp": now + int64((i.ttl+time.Second-1)/time.Second),
	}
	if install != "" {
		claims["install"] = install
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	tok.Header["kid"] = i.key.ID
	return tok.SignedString(i.key.Private)
}

// JWKS returns the key set to publish: the signing key and the others.
func (i *Issuer) JWKS() []byte {
	return JWKS(append([]Key{i.key}, i.others...)...)
}

// JWKS returns the JSON Web Key Set of the given keys' public halves, each
// as RFC 8037 writes it, with its kid, "alg": "EdDSA" and "use": "sig".
func JWKS(keys ...Key) []byte {
	// Not nil: an empty set is "keys": [], never null.
	set := jose.JSONWebKeySet{Keys: make([]jose.JSONWebKey, 0, len(keys))}
	for _, k := range keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.Public(), KeyID: k.ID, Algorithm: "EdDSA", Use: "sig"})
	}
	b, err := json.Marshal(set)
	if err != nil {
		// As in thumbprint: go-jose refuses no key made from a private key.
		panic("identity: JWKS: " + err.Error())
	}
	return b
}
