package identity

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"sync"
	"time"
)

// PublicKey is a verification key with the algorithms it may verify.
type PublicKey struct {
	ID  string
	Key crypto.PublicKey
	// Algs are the JWS algorithms this key accepts; a JWK's "alg" narrows
	// them to one.
	Algs []string
}

// AlgsFor returns the algorithms a key of this type verifies: the key's
// type decides, never the token, so an RSA key cannot be used as an HMAC
// secret.
func AlgsFor(key crypto.PublicKey) ([]string, error) {
	switch k := key.(type) {
	case ed25519.PublicKey:
		return []string{"EdDSA"}, nil
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return nil, fmt.Errorf("RSA key of %d bits: at least 2048 are required", k.N.BitLen())
		}
		return []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}, nil
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return []string{"ES256"}, nil
		case elliptic.P384():
			return []string{"ES384"}, nil
		case elliptic.P521():
			return []string{"ES512"}, nil
		}
		return nil, errors.New("unsupported ECDSA curve")
	}
	return nil, fmt.Errorf("unsupported key type %T", key)
}

type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
	N   string `json:"n"`
	E   string `json:"e"`
}

// ParseJWKS reads a JSON Web Key Set. Keys that are not for signatures, or
// of a type it does not know, are skipped; a malformed key of a known type
// is an error.
func ParseJWKS(data []byte) ([]PublicKey, error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("JWKS: %w", err)
	}
	var out []PublicKey
	for i, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		pub, err := k.publicKey()
		if errors.Is(err, errSkip) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("JWKS key %d (kid %q): %w", i, k.Kid, err)
		}
		algs, err := AlgsFor(pub)
		if err != nil {
			return nil, fmt.Errorf("JWKS key %d (kid %q): %w", i, k.Kid, err)
		}
		if k.Alg != "" {
			ok := false
			for _, a := range algs {
				ok = ok || a == k.Alg
			}
			if !ok {
				return nil, fmt.Errorf("JWKS key %d (kid %q): alg %s does not fit a %s key", i, k.Kid, k.Alg, k.Kty)
			}
			algs = []string{k.Alg}
		}
		out = append(out, PublicKey{ID: k.Kid, Key: pub, Algs: algs})
	}
	return out, nil
}

var errSkip = errors.New("skip")

func (k jwk) publicKey() (crypto.PublicKey, error) {
	b64 := base64.RawURLEncoding.DecodeString
	switch k.Kty {
	case "OKP":
		if k.Crv != "Ed25519" {
			return nil, errSkip
		}
		x, err := b64(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return nil, errors.New("bad Ed25519 x")
		}
		return ed25519.PublicKey(x), nil
	case "RSA":
		n, err1 := b64(k.N)
		e, err2 := b64(k.E)
		if err1 != nil || err2 != nil || len(n) == 0 || len(e) == 0 || len(e) > 4 {
			return nil, errors.New("bad RSA n or e")
		}
		return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}, nil
	case "EC":
		var curve elliptic.Curve
		switch k.Crv {
		case "P-256":
			curve = elliptic.P256()
		case "P-384":
			curve = elliptic.P384()
		case "P-521":
			curve = elliptic.P521()
		default:
			return nil, errSkip
		}
		x, err1 := b64(k.X)
		y, err2 := b64(k.Y)
		size := (curve.Params().BitSize + 7) / 8
		if err1 != nil || err2 != nil || len(x) != size || len(y) != size {
			return nil, errors.New("bad EC x or y")
		}
		// Uncompressed point: 0x04 || X || Y; ecdsa.ParseUncompressedPublicKey
		// checks the point is on the curve.
		point := append(append([]byte{4}, x...), y...)
		pub, err := ecdsa.ParseUncompressedPublicKey(curve, point)
		if err != nil {
			return nil, fmt.Errorf("bad EC point: %v", err)
		}
		return pub, nil
	}
	return nil, errSkip
}

// Refresh limits of a RemoteKeySet.
const (
	MinRefreshInterval = 30 * time.Second
	MaxKeyAge          = 10 * time.Minute
)

// RemoteKeySet is a JWKS fetched from a URL and cached. It is fetched again
// every MaxKeyAge, and on an unknown kid at most once per
// MinRefreshInterval, so a flood of forged kids cannot hammer the issuer.
type RemoteKeySet struct {
	url    string
	client *http.Client
	now    func() time.Time

	mu        sync.Mutex
	keys      []PublicKey
	fetched   time.Time // last successful fetch
	attempted time.Time // last attempt
	lastErr   error
}

// NewRemoteKeySet returns a key set for url. client may be nil.
func NewRemoteKeySet(url string, client *http.Client) *RemoteKeySet {
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	return &RemoteKeySet{url: url, client: client, now: time.Now}
}

// SetClock replaces the clock, for tests.
func (s *RemoteKeySet) SetClock(now func() time.Time) { s.now = now }

// Lookup returns the keys with the given kid (all keys when kid is empty),
// fetching the set when it is stale or the kid is unknown.
func (s *RemoteKeySet) Lookup(ctx context.Context, kid string) ([]PublicKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	// Until a first fetch succeeds, retry each second rather than each
	// MinRefreshInterval: an issuer that starts after us must not lock
	// every caller out for half a minute.
	retry := MinRefreshInterval
	if s.fetched.IsZero() {
		retry = time.Second
	}
	stale := s.fetched.IsZero() || now.Sub(s.fetched) >= MaxKeyAge
	if stale && (s.attempted.IsZero() || now.Sub(s.attempted) >= retry) {
		s.fetch(ctx, now)
	}
	if found := match(s.keys, kid); len(found) > 0 {
		return found, nil
	}
	if now.Sub(s.attempted) >= retry {
		s.fetch(ctx, now)
		if found := match(s.keys, kid); len(found) > 0 {
			return found, nil
		}
	}
	if s.fetched.IsZero() && s.lastErr != nil {
		return nil, fmt.Errorf("no keys: %w", s.lastErr)
	}
	return nil, fmt.Errorf("no key with kid %q", kid)
}

func (s *RemoteKeySet) fetch(ctx context.Context, now time.Time) {
	s.attempted = now
	keys, err := s.get(ctx)
	if err != nil {
		s.lastErr = err
		return
	}
	s.keys, s.fetched, s.lastErr = keys, now, nil
}

func (s *RemoteKeySet) get(ctx context.Context) ([]PublicKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching JWKS %s: %w", s.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching JWKS %s: status %d", s.url, resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("fetching JWKS %s: %w", s.url, err)
	}
	return ParseJWKS(data)
}

func match(keys []PublicKey, kid string) []PublicKey {
	var out []PublicKey
	for _, k := range keys {
		if kid == "" || k.ID == kid {
			out = append(out, k)
		}
	}
	return out
}
