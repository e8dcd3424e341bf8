package verify

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

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

// KeyDecoder reads the key material of one JWK whose members ParseJWKS
// has checked: no private members, a signing key of a known type and
// curve. It returns an *rsa.PublicKey, *ecdsa.PublicKey or
// ed25519.PublicKey, or an error saying why the key is malformed.
type KeyDecoder func(raw []byte) (crypto.PublicKey, error)

// ParseJWKS reads a JSON Web Key Set, decode reading each key's material
// (nil: DecodeJWK). Keys that are not for signatures, or of a type or
// curve it does not know, are skipped (RFC 7517 §5); a key of a known
// type that is malformed, too weak (RSA under 2048 bits), refused by
// decode, or that carries private members is an error.
func ParseJWKS(data []byte, decode KeyDecoder) ([]PublicKey, error) {
	if decode == nil {
		decode = DecodeJWK
	}
	var set struct {
		Keys []jsontext.Value `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("JWKS: %w", err)
	}
	var out []PublicKey
	for i, raw := range set.Keys {
		k, err := parseJWK(raw, decode)
		if errors.Is(err, errSkip) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("JWKS key %d (kid %q): %w", i, k.ID, err)
		}
		out = append(out, k)
	}
	return out, nil
}

var errSkip = errors.New("skip")

// jwkMembers are what parseJWK reads of a key before its decoder does:
// whether to use the key at all, whether it carries private members, and
// the length of RSA's e. The decoders match names case-sensitively and
// refuse duplicates too, so they see the same members.
type jwkMembers struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Crv string `json:"crv"`
	Alg string `json:"alg"`
	E   string `json:"e"`
	// The private members of RSA, EC and OKP keys
	// (RFC 7518 §6.2.2, §6.3.2; RFC 8037 §2).
	D   jsontext.Value `json:"d"`
	P   jsontext.Value `json:"p"`
	Q   jsontext.Value `json:"q"`
	DP  jsontext.Value `json:"dp"`
	DQ  jsontext.Value `json:"dq"`
	QI  jsontext.Value `json:"qi"`
	Oth jsontext.Value `json:"oth"`
}

// ecCurves are the curves the decoders read; a key on another is skipped.
var ecCurves = []string{"P-256", "P-384", "P-521"}

// parseJWK reads one key of a set. The PublicKey it returns carries the
// kid even with an error, for the error's sake.
func parseJWK(raw jsontext.Value, decode KeyDecoder) (PublicKey, error) {
	var m jwkMembers
	if err := json.Unmarshal(raw, &m); err != nil {
		return PublicKey{}, err
	}
	k := PublicKey{ID: m.Kid}
	if m.Use != "" && m.Use != "sig" {
		return k, errSkip
	}
	// what names the members a decoder's error can be about.
	var what string
	switch {
	case m.Kty == "RSA":
		what = "RSA n or e"
	case m.Kty == "EC" && slices.Contains(ecCurves, m.Crv):
		what = "EC x or y"
	case m.Kty == "OKP" && m.Crv == "Ed25519":
		what = "Ed25519 x"
	default:
		// "oct" keys too: a shared secret never verifies a caller's token
		// by a key set.
		return k, errSkip
	}
	for _, p := range []jsontext.Value{m.D, m.P, m.Q, m.DP, m.DQ, m.QI, m.Oth} {
		if p != nil {
			// Its owner published a signing key: whoever read the set
			// can sign as them.
			return k, errors.New("the key carries private members: a JWKS publishes public keys only")
		}
	}
	// Safe on input from the network once private members are refused
	// above: they are what makes some decoders unsafe there.
	key, err := decode(raw)
	if err != nil {
		return k, fmt.Errorf("bad %s: %w", what, err)
	}
	// RSA keys have e = 65537; one of more than 4 bytes (6 base64url
	// characters) is a malformed key, and a decoder may keep only its
	// low 64 bits.
	if m.Kty == "RSA" && len(m.E) > 6 {
		return k, fmt.Errorf("bad %s: e is longer than 4 bytes", what)
	}
	algs, err := AlgsFor(key)
	if err != nil {
		return k, err
	}
	if m.Alg != "" {
		if !slices.Contains(algs, m.Alg) {
			return k, fmt.Errorf("alg %s does not fit a %s key", m.Alg, m.Kty)
		}
		algs = []string{m.Alg}
	}
	k.Key, k.Algs = key, algs
	return k, nil
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
	decode KeyDecoder
	client *http.Client
	clock  clock.Clock
	logger *slog.Logger
	// timeout bounds a fetch: FetchTimeout, shorter in tests.
	timeout time.Duration

	mu        sync.Mutex // guards what follows; held only to read or swap it
	keys      []PublicKey
	fetched   time.Time     // start of the last successful fetch
	attempted time.Time     // start of the last fetch
	inflight  chan struct{} // closed when the running fetch ends; nil when none runs
}

// NewRemoteKeySet returns a key set for url, its keys read by decode (nil:
// DecodeJWK). client may be nil. Failed fetches are logged to logger,
// which may be nil (no log).
func NewRemoteKeySet(url string, decode KeyDecoder, client *http.Client, logger *slog.Logger) *RemoteKeySet {
	if client == nil {
		client = &http.Client{}
	}
	// A copy, so that the caller's client keeps its own redirect rule.
	c := *client
	c.CheckRedirect = keepScheme
	client = &c
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &RemoteKeySet{url: url, decode: decode, client: client, clock: clock.Real, logger: logger, timeout: FetchTimeout}
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
		s.logger.Error("fetching the JWKS failed", slog.String("url", s.url), slog.Any("error", err))
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
	return ParseJWKS(data, s.decode)
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

// DecodeJWK is the KeyDecoder of the component kit: jwkset reads the key
// material, from members read as parseJWK reads them (names matched
// case-sensitively, a repeated name refused). The gateway reads the key
// sets of other issuers with identity.DecodeJWK, go-jose's stricter
// reader; this one keeps go-jose out of what components import.
func DecodeJWK(raw []byte) (crypto.PublicKey, error) {
	var m jwkset.JWKMarshal
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	jwk, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
	if err != nil {
		return nil, err
	}
	switch key := jwk.Key().(type) {
	case ed25519.PublicKey, *rsa.PublicKey, *ecdsa.PublicKey:
		return key, nil
	}
	return nil, errors.New("not a public key")
}
