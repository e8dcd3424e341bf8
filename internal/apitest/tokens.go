package apitest

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/golang-jwt/jwt/v5"
)

// The pages config of the tests: page tokens are HS256 with PageSecret,
// issuer https://app.test, audience toolgate-pages; PageOrigin is one
// more allowed page origin.
const (
	PageSecret   = "page-secret-0123456789-abcdefghij-klmnop"
	PageOrigin   = "http://localhost:9090"
	ThreadCtx    = `"context":{"source":"thread","threadId":"th_1"}`
	PageIdentity = `"identity":{"user":"u_1"}`
)

// PageClaims are a valid page token's claims for a user and thread, of no
// installation: its page sees only calls whose identity has none
// (PageIdentity's).
func PageClaims(user, thread string) jwt.MapClaims {
	return jwt.MapClaims{
		"sub": user, "thread": thread,
		"iss": "https://app.test", "aud": "toolgate-pages",
		"exp": time.Now().Add(5 * time.Minute).Unix(),
	}
}

// SignHS256 signs claims with a shared secret.
func SignHS256(t testing.TB, claims jwt.MapClaims, secret string) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// PageToken is a valid page token for a user and thread.
func PageToken(t testing.TB, user, thread string) string {
	return SignHS256(t, PageClaims(user, thread), PageSecret)
}

// InstallPageClaims are PageClaims with an installation (claim install).
func InstallPageClaims(user, install, thread string) jwt.MapClaims {
	c := PageClaims(user, thread)
	c["install"] = install
	return c
}

// InstallPageToken is a valid page token for a user of an installation
// and a thread.
func InstallPageToken(t testing.TB, user, install, thread string) string {
	return SignHS256(t, InstallPageClaims(user, install, thread), PageSecret)
}

// Platform is a caller's token issuer: RSA keys published as a JWKS at
// its URL.
type Platform struct {
	*httptest.Server
	mu   sync.Mutex
	keys map[string]*rsa.PrivateKey
}

// NewPlatform starts a Platform with a key for each kid; it stops when
// the test ends.
func NewPlatform(t testing.TB, kids ...string) *Platform {
	p := &Platform{keys: map[string]*rsa.PrivateKey{}}
	for _, kid := range kids {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		p.keys[kid] = k
	}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		var set struct {
			Keys []map[string]string `json:"keys"`
		}
		for kid, k := range p.keys {
			set.Keys = append(set.Keys, map[string]string{
				"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
				"n": base64.RawURLEncoding.EncodeToString(k.N.Bytes()),
				"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(k.E)).Bytes()),
			})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.MarshalWrite(w, set)
	}))
	t.Cleanup(p.Close)
	return p
}

// Token signs claims RS256 under kid; a kid the platform does not publish
// gets a key of its own, so the token cannot verify.
func (p *Platform) Token(t testing.TB, kid string, claims jwt.MapClaims) string {
	t.Helper()
	p.mu.Lock()
	k := p.keys[kid]
	p.mu.Unlock()
	if k == nil {
		var err error
		if k, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			t.Fatal(err)
		}
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// GoodClaims are a valid caller token's claims (issuer
// https://platform.test, audience toolgate, install in_9).
func GoodClaims(user, role string) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{
		"iss": "https://platform.test", "aud": "toolgate", "sub": user, "install": "in_9", "role": role,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Minute).Unix(),
	}
}

// PublicKey is the public half of kid's key, nil if the platform has none.
func (p *Platform) PublicKey(kid string) *rsa.PublicKey {
	p.mu.Lock()
	defer p.mu.Unlock()
	if k := p.keys[kid]; k != nil {
		return &k.PublicKey
	}
	return nil
}
