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

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/clock"
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
	// FetchTimeout bounds one fetch of the set. It is the fetch's own:
	// the fetch is shared by every lookup waiting on it, so no one
	// caller's deadline or cancellation may end it for the others.
	FetchTimeout = 10 * time.Second
)

// ErrKeysUnavailable is why a lookup fails when the set has never been
// fetched: the fetch's own error names the URL and what the issuer
// answered, which is for the operator's log, never for the sender of the
// token.
var ErrKeysUnavailable = errors.New("the key set could not be fetched")

// ErrUnknownKey is why a lookup fails when no key of a fetched set has
// the token's kid.
var ErrUnknownKey = errors.New("no key with the token's kid")

// RemoteKeySet is a JWKS fetched from a URL and cached. It is fetched again
// every MaxKeyAge, and on an unknown kid at most once per
// MinRefreshInterval, so a flood of forged kids cannot hammer the issuer.
//
// One fetch runs at a time, in its own goroutine with its own timeout;
// lookups that need it wait for it (or their own context), and the lock
// is never held across it. A known kid never waits: while the set is
// refreshed, the keys it had keep verifying.
type RemoteKeySet struct {
	url    string
	client *http.Client
	clock  clock.Clock
	logger *zap.Logger
	// timeout bounds a fetch: FetchTimeout, shorter in tests.
	timeout time.Duration

	mu        sync.Mutex // guards what follows; held only to read or swap it
	keys      []PublicKey
	fetched   time.Time     // start of the last successful fetch
	attempted time.Time     // start of the last fetch
	inflight  chan struct{} // closed when the running fetch ends; nil when none runs
}

// NewRemoteKeySet returns a key set for url. client may be nil. Failed
// fetches are logged to logger, which may be nil.
func NewRemoteKeySet(url string, client *http.Client, logger *zap.Logger) *RemoteKeySet {
	if client == nil {
		client = &http.Client{}
	}
	// A copy, so that the caller's client keeps its own redirect rule.
	c := *client
	c.CheckRedirect = keepScheme
	client = &c
	if logger == nil {
		logger = zap.NewNop()
	}
	return &RemoteKeySet{url: url, client: client, clock: clock.Real, logger: logger, timeout: FetchTimeout}
}

// SetClock replaces the clock, for tests.
func (s *RemoteKeySet) SetClock(c clock.Clock) { s.clock = clock.Or(c) }

// Lookup returns the keys with the given kid (all keys when kid is empty).
// A known kid is answered at once, starting a refresh in the background
// when the set is stale. An unknown kid waits for a refresh, when one runs
// or may start, or for ctx.
func (s *RemoteKeySet) Lookup(ctx context.Context, kid string) ([]PublicKey, error) {
	s.mu.Lock()
	found := match(s.keys, kid)
	done := s.refresh(len(found) == 0)
	s.mu.Unlock()
	if len(found) > 0 {
		return found, nil
	}
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if found := match(s.keys, kid); len(found) > 0 {
		return found, nil
	}
	if s.fetched.IsZero() {
		return nil, ErrKeysUnavailable
	}
	return nil, ErrUnknownKey
}

// refresh starts a fetch when one is due and returns the channel the
// running fetch closes, or nil when none runs. unknown says a kid was not
// found. s.mu is held.
func (s *RemoteKeySet) refresh(unknown bool) <-chan struct{} {
	if s.inflight != nil {
		return s.inflight
	}
	now := s.clock.Now()
	// Until a first fetch succeeds, retry each second rather than each
	// MinRefreshInterval: an issuer that starts after us must not lock
	// every caller out for half a minute.
	retry := MinRefreshInterval
	if s.fetched.IsZero() {
		retry = time.Second
	}
	stale := s.fetched.IsZero() || now.Sub(s.fetched) >= MaxKeyAge
	due := s.attempted.IsZero() || now.Sub(s.attempted) >= retry
	if !due || !(stale || unknown) {
		return nil
	}
	s.attempted = now
	s.inflight = make(chan struct{})
	go s.fetch(now, s.inflight)
	return s.inflight
}

// fetch gets the set and swaps it in; done is closed when it is over. A
// failed fetch keeps the last good set.
func (s *RemoteKeySet) fetch(started time.Time, done chan struct{}) {
	defer close(done)
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	keys, err := s.get(ctx)
	cancel()
	if err != nil {
		s.logger.Error("fetching the JWKS failed", zap.String("url", s.url), zap.Error(err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight = nil
	if err == nil {
		s.keys, s.fetched = keys, started
	}
}

// keepScheme follows at most 3 redirects, none from https to another
// scheme: the keys that decide who a caller is must not come over a
// connection anyone on the path can rewrite.
func keepScheme(req *http.Request, via []*http.Request) error {
	if len(via) >= 3 {
		return errors.New("stopped after 3 redirects")
	}
	if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
		return fmt.Errorf("refused a redirect from https to %s", req.URL.Scheme)
	}
	return nil
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
