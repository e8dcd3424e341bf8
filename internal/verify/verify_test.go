package verify

import (
	"context"
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-json-experiment/json"
	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/identity"
)

const (
	vIssuer   = "https://issuer.test"
	vAudience = "toolgate"
	vLeeway   = 30 * time.Second
)

// vNow is the time the verifier table runs at.
var vNow = time.Date(2030, 3, 4, 5, 6, 7, 0, time.UTC)

// sigKeys are the asymmetric keys the verifier tests sign with; "other"
// keys are of the same types but unknown to the verifiers.
type sigKeys struct {
	rsa, otherRSA *rsa.PrivateKey
	ec, otherEC   *ecdsa.PrivateKey
	ed, otherEd   ed25519.PrivateKey
}

var (
	sigKeysOnce sync.Once
	sigKeysVal  sigKeys
	sigKeysErr  error
)

func testSigKeys(t testing.TB) sigKeys {
	t.Helper()
	sigKeysOnce.Do(func() {
		var k sigKeys
		var errs [6]error
		k.rsa, errs[0] = rsa.GenerateKey(rand.Reader, 2048)
		k.otherRSA, errs[1] = rsa.GenerateKey(rand.Reader, 2048)
		k.ec, errs[2] = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		k.otherEC, errs[3] = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		_, k.ed, errs[4] = ed25519.GenerateKey(rand.Reader)
		_, k.otherEd, errs[5] = ed25519.GenerateKey(rand.Reader)
		sigKeysVal, sigKeysErr = k, errors.Join(errs[:]...)
	})
	if sigKeysErr != nil {
		t.Fatalf("generating keys: %v", sigKeysErr)
	}
	return sigKeysVal
}

// baseClaims are claims every verifier in the table accepts at vNow.
func baseClaims() jwt.MapClaims {
	return jwt.MapClaims{
		"iss": vIssuer,
		"aud": vAudience,
		"sub": "user_1",
		"iat": vNow.Add(-time.Minute).Unix(),
		"nbf": vNow.Add(-time.Minute).Unix(),
		"exp": vNow.Add(5 * time.Minute).Unix(),
	}
}

// signJWT signs claims with method and key, setting kid when not empty.
func signJWT(t testing.TB, method jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("signing %s: %v", method.Alg(), err)
	}
	return s
}

func b64JSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// unsignedJWT crafts a token by hand with the given header and an empty
// signature, as an alg "none" attack does.
func unsignedJWT(t testing.TB, header map[string]any, claims jwt.MapClaims) string {
	t.Helper()
	return b64JSON(t, header) + "." + b64JSON(t, claims) + "."
}

// pubJWK writes a public key as a JWK, EC coordinates padded to the curve
// size.
func pubJWK(t testing.TB, kid string, pub crypto.PublicKey) map[string]string {
	t.Helper()
	b64 := base64.RawURLEncoding.EncodeToString
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return map[string]string{"kty": "RSA", "kid": kid, "n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())}
	case *ecdsa.PublicKey:
		raw, err := k.Bytes() // 0x04 || X || Y, each padded to the curve size
		if err != nil {
			t.Fatal(err)
		}
		size := (k.Curve.Params().BitSize + 7) / 8
		return map[string]string{"kty": "EC", "kid": kid, "crv": k.Curve.Params().Name, "x": b64(raw[1 : 1+size]), "y": b64(raw[1+size:])}
	case ed25519.PublicKey:
		return map[string]string{"kty": "OKP", "kid": kid, "crv": "Ed25519", "x": b64(k)}
	}
	t.Fatalf("no JWK for %T", pub)
	return nil
}

// withJWK returns a copy of a JWK with fields set (or removed when "").
func withJWK(k map[string]string, kv ...string) map[string]string {
	out := make(map[string]string, len(k)+len(kv)/2)
	for n, v := range k {
		out[n] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(out, kv[i])
		} else {
			out[kv[i]] = kv[i+1]
		}
	}
	return out
}

func jwksOf(t testing.TB, keys ...map[string]string) []byte {
	t.Helper()
	if keys == nil {
		keys = []map[string]string{}
	}
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jwksServer serves a JWKS that a test can swap, or fail, while it runs,
// and counts its hits.
type jwksServer struct {
	srv    *httptest.Server
	mu     sync.Mutex
	body   []byte
	status int
	hits   atomic.Int64
}

func newJWKSServer(t *testing.T, body []byte) *jwksServer {
	t.Helper()
	s := &jwksServer{body: body, status: http.StatusOK}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		body, status := s.body, s.status
		s.mu.Unlock()
		if status != http.StatusOK {
			http.Error(w, "down", status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	if !strings.HasPrefix(s.srv.URL, "http://127.0.0.1:") {
		t.Fatalf("JWKS server at %s, want 127.0.0.1", s.srv.URL)
	}
	t.Cleanup(s.srv.Close)
	return s
}

func (s *jwksServer) set(body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body = body
}

func (s *jwksServer) setStatus(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = code
}

func rsaPublicPEM(t testing.TB, pub *rsa.PublicKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// wantRefused checks err is a *Error whose message holds want.
func wantRefused(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("token accepted, want refused with %q", want)
	}
	var ve *Error
	if !errors.As(err, &ve) {
		t.Fatalf("error %v (%T) is not a *Error", err, err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err.Error(), want)
	}
}

func TestVerifier(t *testing.T) {
	k := testSigKeys(t)
	secret := []byte("0123456789abcdef0123456789abcdef") // 32 bytes
	opts := Options{Issuer: vIssuer, Audience: vAudience, Leeway: vLeeway}
	at := clock.NewManual(vNow)

	srv := newJWKSServer(t, jwksOf(t,
		withJWK(pubJWK(t, "rsa-1", &k.rsa.PublicKey), "alg", "RS256", "use", "sig"),
		pubJWK(t, "rsa-any", &k.rsa.PublicKey),
		withJWK(pubJWK(t, "ec-1", &k.ec.PublicKey), "alg", "ES256"),
		withJWK(pubJWK(t, "ed-1", k.ed.Public()), "use", "sig"),
		// Skipped: an encryption key with the other RSA key.
		withJWK(pubJWK(t, "enc-1", &k.otherRSA.PublicKey), "use", "enc"),
	))
	set := NewRemoteKeySet(srv.srv.URL, identity.DecodeJWK, nil, nil)
	set.SetClock(at)
	jwksV := NewJWKSVerifier(set, opts)
	jwksV.SetClock(at)

	newKeyV := func(pub crypto.PublicKey) *Verifier {
		v, err := NewKeyVerifier(pub, opts)
		if err != nil {
			t.Fatalf("NewKeyVerifier(%T): %v", pub, err)
		}
		v.SetClock(at)
		return v
	}
	secretV, err := NewSecretVerifier(secret, opts)
	if err != nil {
		t.Fatalf("NewSecretVerifier: %v", err)
	}
	secretV.SetClock(at)

	type signer func(t testing.TB, c jwt.MapClaims) string
	by := func(m jwt.SigningMethod, key any, kid string) signer {
		return func(t testing.TB, c jwt.MapClaims) string { return signJWT(t, m, key, kid, c) }
	}
	rsaPEM := rsaPublicPEM(t, &k.rsa.PublicKey)

	// extra are refusals (want != "") and acceptances (want == "") that
	// only make sense for one setup.
	type extra struct {
		name string
		tok  func(t testing.TB) string
		want string
		is   error
	}
	setups := []struct {
		name  string
		v     *Verifier
		sign  signer
		extra []extra
	}{
		{name: "jwks RS256", v: jwksV, sign: by(jwt.SigningMethodRS256, k.rsa, "rsa-1"), extra: []extra{
			{name: "no kid tries every key", tok: func(t testing.TB) string { return signJWT(t, jwt.SigningMethodRS256, k.rsa, "", baseClaims()) }},
			{name: "alg narrowed to RS256 refuses PS256", tok: func(t testing.TB) string {
				return signJWT(t, jwt.SigningMethodPS256, k.rsa, "rsa-1", baseClaims())
			}, want: "the token's key is not known", is: ErrUnknownKey},
			{name: "HS256 with the RSA public key PEM as secret", tok: func(t testing.TB) string {
				return signJWT(t, jwt.SigningMethodHS256, rsaPEM, "rsa-1", baseClaims())
			}, want: "signature", is: jwt.ErrTokenSignatureInvalid},
			{name: "ES256 header with the RSA key's kid", tok: func(t testing.TB) string {
				return signJWT(t, jwt.SigningMethodES256, k.ec, "rsa-1", baseClaims())
			}, want: "the token's key is not known", is: ErrUnknownKey},
			{name: "signed by an unknown key under a known kid", tok: func(t testing.TB) string {
				return signJWT(t, jwt.SigningMethodRS256, k.otherRSA, "rsa-1", baseClaims())
			}, want: "signature", is: jwt.ErrTokenSignatureInvalid},
			{name: "kid of a skipped encryption key", tok: func(t testing.TB) string {
				return signJWT(t, jwt.SigningMethodRS256, k.otherRSA, "enc-1", baseClaims())
			}, want: "the token's key is not known", is: ErrUnknownKey},
			{name: "unknown kid", tok: func(t testing.TB) string {
				return signJWT(t, jwt.SigningMethodRS256, k.otherRSA, "nope", baseClaims())
			}, want: "the token's key is not known", is: ErrUnknownKey},
		}},
		{name: "jwks PS256 without alg", v: jwksV, sign: by(jwt.SigningMethodPS256, k.rsa, "rsa-any"), extra: []extra{
			{name: "RS512 by the same key", tok: func(t testing.TB) string { return signJWT(t, jwt.SigningMethodRS512, k.rsa, "rsa-any", baseClaims()) }},
		}},
		{name: "jwks ES256", v: jwksV, sign: by(jwt.SigningMethodES256, k.ec, "ec-1"), extra: []extra{
			{name: "signed by an unknown key under a known kid", tok: func(t testing.TB) string {
				return signJWT(t, jwt.SigningMethodES256, k.otherEC, "ec-1", baseClaims())
			}, want: "signature", is: jwt.ErrTokenSignatureInvalid},
			{name: "RS256 header with the EC key's kid", tok: func(t testing.TB) string {
				return signJWT(t, jwt.SigningMethodRS256, k.rsa, "ec-1", baseClaims())
			}, want: "the token's key is not known", is: ErrUnknownKey},
		}},
		{name: "jwks EdDSA", v: jwksV, sign: by(jwt.SigningMethodEdDSA, k.ed, "ed-1"), extra: []extra{
			{name: "no kid", tok: func(t testing.TB) string { return signJWT(t, jwt.SigningMethodEdDSA, k.ed, "", baseClaims()) }},
			{name: "signed by an unknown key under a known kid", tok: func(t testing.TB) string {
				return signJWT(t, jwt.SigningMethodEdDSA, k.otherEd, "ed-1", baseClaims())
			}, want: "signature", is: jwt.ErrTokenSignatureInvalid},
			{name: "signed by an unknown key without kid", tok: func(t testing.TB) string {
				return signJWT(t, jwt.SigningMethodEdDSA, k.otherEd, "", baseClaims())
			}, want: "signature", is: jwt.ErrTokenSignatureInvalid},
			{name: "unknown kid", tok: func(t testing.TB) string {
				return signJWT(t, jwt.SigningMethodEdDSA, k.otherEd, "ed-2", baseClaims())
			}, want: "the token's key is not known", is: ErrUnknownKey},
		}},
		{name: "key RSA", v: newKeyV(&k.rsa.PublicKey), sign: by(jwt.SigningMethodRS256, k.rsa, ""), extra: []extra{
			{name: "PS384", tok: func(t testing.TB) string { return signJWT(t, jwt.SigningMethodPS384, k.rsa, "", baseClaims()) }},
			{name: "HS256 with the RSA public key PEM as secret", tok: func(t testing.TB) string {
				return signJWT(t, jwt.SigningMethodHS256, rsaPEM, "", baseClaims())
			}, want: "signature", is: jwt.ErrTokenSignatureInvalid},
			{name: "HS256 with the PEM and a kid", tok: func(t testing.TB) string {
				return signJWT(t, jwt.SigningMethodHS256, rsaPEM, "whatever", baseClaims())
			}, want: "signature", is: jwt.ErrTokenSignatureInvalid},
			{name: "ES256 header with the RSA key", tok: func(t testing.TB) string {
				return signJWT(t, jwt.SigningMethodES256, k.ec, "", baseClaims())
			}, want: "signature", is: jwt.ErrTokenSignatureInvalid},
			{name: "signed by an unknown key", tok: func(t testing.TB) string {
				return signJWT(t, jwt.SigningMethodRS256, k.otherRSA, "", baseClaims())
			}, want: "signature", is: jwt.ErrTokenSignatureInvalid},
		}},
		{name: "key ECDSA", v: newKeyV(&k.ec.PublicKey), sign: by(jwt.SigningMethodES256, k.ec, "any-kid"), extra: []extra{
			{name: "RS256 against the EC key", tok: func(t testing.TB) string {
				return signJWT(t, jwt.SigningMethodRS256, k.rsa, "", baseClaims())
			}, want: "signature", is: jwt.ErrTokenSignatureInvalid},
			{name: "signed by an unknown key", tok: func(t testing.TB) string {
				return signJWT(t, jwt.SigningMethodES256, k.otherEC, "", baseClaims())
			}, want: "signature", is: jwt.ErrTokenSignatureInvalid},
		}},
		{name: "key Ed25519", v: newKeyV(k.ed.Public()), sign: by(jwt.SigningMethodEdDSA, k.ed, ""), extra: []extra{
			{name: "HS256 with the Ed25519 public key as secret", tok: func(t testing.TB) string {
				return signJWT(t, jwt.SigningMethodHS256, []byte(k.ed.Public().(ed25519.PublicKey)), "", baseClaims())
			}, want: "signature", is: jwt.ErrTokenSignatureInvalid},
			{name: "signed by an unknown key", tok: func(t testing.TB) string {
				return signJWT(t, jwt.SigningMethodEdDSA, k.otherEd, "", baseClaims())
			}, want: "signature", is: jwt.ErrTokenSignatureInvalid},
		}},
		{name: "secret HS256", v: secretV, sign: by(jwt.SigningMethodHS256, secret, ""), extra: []extra{
			{name: "HS512", tok: func(t testing.TB) string { return signJWT(t, jwt.SigningMethodHS512, secret, "", baseClaims()) }},
			{name: "another secret", tok: func(t testing.TB) string {
				return signJWT(t, jwt.SigningMethodHS256, []byte("another secret of at least 32 bytes!"), "", baseClaims())
			}, want: "signature", is: jwt.ErrTokenSignatureInvalid},
			{name: "RS256 against a secret", tok: func(t testing.TB) string {
				return signJWT(t, jwt.SigningMethodRS256, k.rsa, "", baseClaims())
			}, want: "signature", is: jwt.ErrTokenSignatureInvalid},
		}},
	}

	// Claim cases every setup must treat alike.
	claimCases := []struct {
		name string
		mod  func(c jwt.MapClaims)
		want string // "" when accepted
		is   error
	}{
		{name: "good", mod: func(jwt.MapClaims) {}},
		{name: "exp within leeway", mod: func(c jwt.MapClaims) { c["exp"] = vNow.Add(-vLeeway + time.Second).Unix() }},
		{name: "nbf within leeway", mod: func(c jwt.MapClaims) { c["nbf"] = vNow.Add(vLeeway - time.Second).Unix() }},
		{name: "iat within leeway", mod: func(c jwt.MapClaims) { c["iat"] = vNow.Add(vLeeway - time.Second).Unix() }},
		{name: "no nbf nor iat", mod: func(c jwt.MapClaims) { delete(c, "nbf"); delete(c, "iat") }},
		{name: "aud array holding ours", mod: func(c jwt.MapClaims) { c["aud"] = []string{"other", vAudience} }},
		{name: "expired beyond leeway", mod: func(c jwt.MapClaims) { c["exp"] = vNow.Add(-vLeeway - time.Second).Unix() }, want: "expired", is: jwt.ErrTokenExpired},
		{name: "expired long ago", mod: func(c jwt.MapClaims) {
			c["iat"] = vNow.Add(-2 * time.Hour).Unix()
			c["exp"] = vNow.Add(-time.Hour).Unix()
		}, want: "expired", is: jwt.ErrTokenExpired},
		{name: "nbf beyond leeway", mod: func(c jwt.MapClaims) { c["nbf"] = vNow.Add(vLeeway + time.Second).Unix() }, want: "not valid yet", is: jwt.ErrTokenNotValidYet},
		{name: "iat in the future", mod: func(c jwt.MapClaims) { c["iat"] = vNow.Add(vLeeway + time.Second).Unix() }, want: "not valid yet", is: jwt.ErrTokenUsedBeforeIssued},
		{name: "missing exp", mod: func(c jwt.MapClaims) { delete(c, "exp") }, want: "required claim (exp)", is: jwt.ErrTokenRequiredClaimMissing},
		{name: "exp not a number", mod: func(c jwt.MapClaims) { c["exp"] = "tomorrow" }, want: "not accepted", is: jwt.ErrInvalidType},
		{name: "wrong issuer", mod: func(c jwt.MapClaims) { c["iss"] = "https://evil.test" }, want: "issuer is not accepted", is: jwt.ErrTokenInvalidIssuer},
		{name: "missing issuer", mod: func(c jwt.MapClaims) { delete(c, "iss") }, want: "required claim (iss)", is: jwt.ErrTokenRequiredClaimMissing},
		{name: "wrong audience", mod: func(c jwt.MapClaims) { c["aud"] = "billing" }, want: "audience is not accepted", is: jwt.ErrTokenInvalidAudience},
		{name: "aud array without ours", mod: func(c jwt.MapClaims) { c["aud"] = []string{"billing", "notes"} }, want: "audience is not accepted", is: jwt.ErrTokenInvalidAudience},
		{name: "missing audience", mod: func(c jwt.MapClaims) { delete(c, "aud") }, want: "required claim (aud)", is: jwt.ErrTokenRequiredClaimMissing},
	}

	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			for _, cc := range claimCases {
				t.Run(cc.name, func(t *testing.T) {
					c := baseClaims()
					cc.mod(c)
					got, err := s.v.Verify(context.Background(), s.sign(t, c))
					if cc.want == "" {
						if err != nil {
							t.Fatalf("refused: %v", err)
						}
						if got["sub"] != "user_1" || got["iss"] != vIssuer {
							t.Errorf("claims = %v", got)
						}
						return
					}
					wantRefused(t, err, cc.want)
					if got != nil {
						t.Errorf("claims %v returned with an error", got)
					}
					if cc.is != nil && !errors.Is(err, cc.is) {
						t.Errorf("error %v is not %v", err, cc.is)
					}
				})
			}

			// Token-level refusals every setup must make.
			good := s.sign(t, baseClaims())
			parts := strings.Split(good, ".")
			forged := baseClaims()
			forged["sub"] = "admin"
			tokens := []struct {
				name, tok, want string
			}{
				{"alg none", unsignedJWT(t, map[string]any{"alg": "none", "typ": "JWT"}, baseClaims()), "signature"},
				{"alg none with a kid", unsignedJWT(t, map[string]any{"alg": "none", "typ": "JWT", "kid": "ed-1"}, baseClaims()), "signature"},
				{"alg none with the good signature", unsignedJWT(t, map[string]any{"alg": "none", "typ": "JWT"}, baseClaims()) + parts[2], "signature"},
				{"payload swapped under the signature", parts[0] + "." + b64JSON(t, forged) + "." + parts[2], "signature"},
				{"signature stripped", parts[0] + "." + parts[1] + ".", "signature"},
				{"empty", "", "malformed"},
				{"one segment", "abc", "malformed"},
				{"two segments", parts[0] + "." + parts[1], "malformed"},
				{"four segments", good + ".x", "malformed"},
				{"header not base64", "!!!." + parts[1] + "." + parts[2], "malformed"},
				{"header not JSON", base64.RawURLEncoding.EncodeToString([]byte("nope")) + "." + parts[1] + "." + parts[2], "malformed"},
				{"payload not JSON", parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte("[1,2")) + "." + parts[2], "malformed"},
				{"unknown alg", unsignedJWT(t, map[string]any{"alg": "XX999"}, baseClaims()) + parts[2], "not accepted"},
			}
			for _, tc := range tokens {
				t.Run(tc.name, func(t *testing.T) {
					_, err := s.v.Verify(context.Background(), tc.tok)
					wantRefused(t, err, tc.want)
				})
			}
			for _, e := range s.extra {
				t.Run(e.name, func(t *testing.T) {
					got, err := s.v.Verify(context.Background(), e.tok(t))
					if e.want == "" {
						if err != nil {
							t.Fatalf("refused: %v", err)
						}
						if got["sub"] != "user_1" {
							t.Errorf("claims = %v", got)
						}
						return
					}
					wantRefused(t, err, e.want)
					if e.is != nil && !errors.Is(err, e.is) {
						t.Errorf("error %v is not %v", err, e.is)
					}
				})
			}
		})
	}
}

// Without an issuer or audience configured, neither is checked; exp still
// is.
func TestVerifierOptionalChecks(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	v, err := NewSecretVerifier(secret, Options{})
	if err != nil {
		t.Fatal(err)
	}
	v.SetClock(clock.NewManual(vNow))
	c := baseClaims()
	delete(c, "iss")
	delete(c, "aud")
	if _, err := v.Verify(context.Background(), signJWT(t, jwt.SigningMethodHS256, secret, "", c)); err != nil {
		t.Errorf("token without iss and aud refused: %v", err)
	}
	// No leeway: one second past exp is expired.
	c["exp"] = vNow.Add(-time.Second).Unix()
	_, err = v.Verify(context.Background(), signJWT(t, jwt.SigningMethodHS256, secret, "", c))
	wantRefused(t, err, "expired")
	delete(c, "exp")
	_, err = v.Verify(context.Background(), signJWT(t, jwt.SigningMethodHS256, secret, "", c))
	wantRefused(t, err, "required claim (exp)")
}

func TestNewKeyVerifierRefused(t *testing.T) {
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	p224, err := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	x, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k := testSigKeys(t)
	tests := []struct {
		name string
		pub  crypto.PublicKey
		want string
	}{
		{"RSA 1024", &small.PublicKey, "at least 2048"},
		{"P-224", &p224.PublicKey, "unsupported ECDSA curve"},
		{"X25519", x.PublicKey(), "unsupported key type"},
		{"Ed25519 private key", k.ed, "unsupported key type"},
		{"RSA private key", k.rsa, "unsupported key type"},
		{"HMAC bytes", []byte("0123456789abcdef0123456789abcdef"), "unsupported key type"},
		{"nil", nil, "unsupported key type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := NewKeyVerifier(tt.pub, Options{})
			if err == nil {
				t.Fatalf("NewKeyVerifier accepted %T", tt.pub)
			}
			if v != nil {
				t.Error("a verifier returned with an error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
}

func TestNewSecretVerifierLength(t *testing.T) {
	for _, n := range []int{0, 1, 16, 31, 32, 64} {
		v, err := NewSecretVerifier(make([]byte, n), Options{})
		if n < 32 {
			if err == nil || v != nil {
				t.Errorf("%d-byte secret accepted", n)
			} else if !strings.Contains(err.Error(), "at least 32") {
				t.Errorf("%d-byte secret: error %q does not give the minimum", n, err)
			}
			continue
		}
		if err != nil || v == nil {
			t.Errorf("%d-byte secret refused: %v", n, err)
		}
	}
}

func TestVerifyErrorMessages(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{jwt.ErrTokenExpired, "the token has expired"},
		{jwt.ErrTokenNotValidYet, "the token is not valid yet"},
		{jwt.ErrTokenUsedBeforeIssued, "the token is not valid yet"},
		{jwt.ErrTokenInvalidIssuer, "the token's issuer is not accepted"},
		{jwt.ErrTokenInvalidAudience, "the token's audience is not accepted"},
		{jwt.ErrTokenMalformed, "the token is malformed"},
		{jwt.ErrTokenRequiredClaimMissing, "the token lacks a required claim"},
		{jwt.ErrTokenSignatureInvalid, "the token's signature does not verify"},
		{errors.New("boom"), "the token is not accepted: boom"},
	}
	for _, tt := range tests {
		e := &Error{err: tt.err}
		if got := e.Error(); got != tt.want {
			t.Errorf("Error{%v} = %q, want %q", tt.err, got, tt.want)
		}
		if !errors.Is(e, tt.err) {
			t.Errorf("Error{%v} does not unwrap to it", tt.err)
		}
	}
}

// rotationFixture is a JWKS verifier on a moving clock against a server
// whose key set the test swaps.
type rotationFixture struct {
	srv   *jwksServer
	clock *clock.Manual
	keys  *RemoteKeySet
	logs  *observer.ObservedLogs
	v     *Verifier
	t0    time.Time
	a, b  ed25519.PrivateKey
	jwkA  map[string]string
	jwkB  map[string]string
}

func newRotationFixture(t *testing.T, keys ...string) *rotationFixture {
	t.Helper()
	f := &rotationFixture{t0: vNow, clock: clock.NewManual(vNow)}
	var err error
	if _, f.a, err = ed25519.GenerateKey(rand.Reader); err != nil {
		t.Fatal(err)
	}
	if _, f.b, err = ed25519.GenerateKey(rand.Reader); err != nil {
		t.Fatal(err)
	}
	f.jwkA = pubJWK(t, "A", f.a.Public())
	f.jwkB = pubJWK(t, "B", f.b.Public())
	f.srv = newJWKSServer(t, f.set(t, keys...))
	core, logs := observer.New(zap.InfoLevel)
	f.logs = logs
	f.keys = NewRemoteKeySet(f.srv.srv.URL, identity.DecodeJWK, f.srv.srv.Client(), slog.New(zapslog.NewHandler(core)))
	f.keys.SetClock(f.clock)
	f.v = NewJWKSVerifier(f.keys, Options{Issuer: vIssuer, Audience: vAudience})
	f.v.SetClock(f.clock)
	return f
}

// set builds a JWKS of the named keys ("A", "B").
func (f *rotationFixture) set(t *testing.T, names ...string) []byte {
	var keys []map[string]string
	for _, n := range names {
		keys = append(keys, map[string]map[string]string{"A": f.jwkA, "B": f.jwkB}[n])
	}
	return jwksOf(t, keys...)
}

// verify verifies a token signed by key A or B (under its own kid) at t0+d.
func (f *rotationFixture) verify(t *testing.T, d time.Duration, name string) error {
	t.Helper()
	f.clock.Set(f.t0.Add(d))
	key := map[string]ed25519.PrivateKey{"A": f.a, "B": f.b}[name]
	c := jwt.MapClaims{"iss": vIssuer, "aud": vAudience, "sub": "u", "iat": f.t0.Unix(), "exp": f.t0.Add(time.Hour).Unix()}
	_, err := f.v.Verify(context.Background(), signJWT(t, jwt.SigningMethodEdDSA, key, name, c))
	return err
}

func (f *rotationFixture) wantHits(t *testing.T, n int64) {
	t.Helper()
	f.keys.idle()
	if got := f.srv.hits.Load(); got != n {
		t.Fatalf("JWKS fetched %d times, want %d", got, n)
	}
}

func TestRemoteKeySetRotation(t *testing.T) {
	t.Run("new kid refetched once the last fetch is 30s old", func(t *testing.T) {
		f := newRotationFixture(t, "A")
		if err := f.verify(t, 0, "A"); err != nil {
			t.Fatalf("A refused: %v", err)
		}
		f.wantHits(t, 1)
		f.srv.set(f.set(t, "A", "B"))
		if err := f.verify(t, MinRefreshInterval, "B"); err != nil {
			t.Fatalf("B refused 30s after the last fetch: %v", err)
		}
		f.wantHits(t, 2)
		if err := f.verify(t, MinRefreshInterval+time.Second, "A"); err != nil {
			t.Fatalf("A refused after the refetch: %v", err)
		}
		f.wantHits(t, 2)
	})

	t.Run("unknown kid does not refetch within 30s", func(t *testing.T) {
		f := newRotationFixture(t, "A")
		if err := f.verify(t, 0, "A"); err != nil {
			t.Fatalf("A refused: %v", err)
		}
		f.srv.set(f.set(t, "A", "B"))
		for _, d := range []time.Duration{0, time.Second, 10 * time.Second, MinRefreshInterval - time.Millisecond} {
			for range 20 { // a flood of calls with the unknown kid
				wantRefused(t, f.verify(t, d, "B"), "the token's key is not known")
			}
		}
		f.wantHits(t, 1)
		// The 30s are counted from the last attempt: now it refetches.
		if err := f.verify(t, MinRefreshInterval, "B"); err != nil {
			t.Fatalf("B refused at 30s: %v", err)
		}
		f.wantHits(t, 2)
		// And a forged kid right after does not fetch again.
		c := jwt.MapClaims{"iss": vIssuer, "aud": vAudience, "exp": f.t0.Add(time.Hour).Unix()}
		_, err := f.v.Verify(context.Background(), signJWT(t, jwt.SigningMethodEdDSA, f.a, "forged", c))
		wantRefused(t, err, "the token's key is not known")
		f.wantHits(t, 2)
	})

	t.Run("set refetched after 10 minutes for a known kid", func(t *testing.T) {
		f := newRotationFixture(t, "A")
		if err := f.verify(t, 0, "A"); err != nil {
			t.Fatalf("A refused: %v", err)
		}
		f.srv.set(f.set(t, "B")) // A removed
		for _, d := range []time.Duration{time.Minute, 5 * time.Minute, MaxKeyAge - time.Millisecond} {
			if err := f.verify(t, d, "A"); err != nil {
				t.Fatalf("A refused at %v, before the set is stale: %v", d, err)
			}
		}
		f.wantHits(t, 1)
		// Stale: A still verifies while the refresh it started runs,
		// and no longer once it has run.
		if err := f.verify(t, MaxKeyAge, "A"); err != nil {
			t.Fatalf("A refused while the stale set is refreshed: %v", err)
		}
		f.wantHits(t, 2)
		wantRefused(t, f.verify(t, MaxKeyAge, "A"), "the token's key is not known")
		f.wantHits(t, 2)
		if err := f.verify(t, MaxKeyAge, "B"); err != nil {
			t.Fatalf("B refused after the refetch: %v", err)
		}
		f.wantHits(t, 2)
	})

	t.Run("a failed refresh keeps the last good set", func(t *testing.T) {
		f := newRotationFixture(t, "A")
		if err := f.verify(t, 0, "A"); err != nil {
			t.Fatalf("A refused: %v", err)
		}
		f.srv.setStatus(http.StatusServiceUnavailable)
		if err := f.verify(t, MaxKeyAge, "A"); err != nil {
			t.Fatalf("A refused while the issuer is down: %v", err)
		}
		f.wantHits(t, 2)
		// Retried every MinRefreshInterval, not every call.
		if err := f.verify(t, MaxKeyAge+time.Second, "A"); err != nil {
			t.Fatal(err)
		}
		f.wantHits(t, 2)
		f.srv.setStatus(http.StatusOK)
		f.srv.set(f.set(t, "B"))
		if err := f.verify(t, MaxKeyAge+MinRefreshInterval, "A"); err != nil {
			t.Fatalf("A refused while the set is refreshed: %v", err)
		}
		f.wantHits(t, 3)
		wantRefused(t, f.verify(t, MaxKeyAge+MinRefreshInterval, "A"), "the token's key is not known")
		f.wantHits(t, 3)
		// The failure was logged for the operator.
		if n := f.logs.FilterMessage("fetching the JWKS failed").FilterField(zap.String("url", f.srv.srv.URL)).Len(); n != 1 {
			t.Errorf("%d failed fetches logged with the URL, want 1", n)
		}
	})

	t.Run("issuer down before the first fetch retries after 1s", func(t *testing.T) {
		f := newRotationFixture(t, "A")
		f.srv.setStatus(http.StatusServiceUnavailable)
		err := f.verify(t, 0, "A")
		wantRefused(t, err, "the token could not be verified")
		if !errors.Is(err, ErrKeysUnavailable) {
			t.Errorf("error %v is not ErrKeysUnavailable", err)
		}
		// What failed is logged, never told to the token's sender.
		if strings.Contains(err.Error(), "503") || strings.Contains(err.Error(), f.srv.srv.URL) {
			t.Errorf("the refusal %q tells the fetch error", err)
		}
		if logged := f.logs.FilterMessage("fetching the JWKS failed").All(); len(logged) != 1 || !strings.Contains(logged[0].ContextMap()["error"].(string), "status 503") {
			t.Errorf("logged %+v, want the fetch error with its status", logged)
		}
		f.wantHits(t, 1)
		wantRefused(t, f.verify(t, 500*time.Millisecond, "A"), "the token could not be verified")
		f.wantHits(t, 1)
		f.srv.setStatus(http.StatusOK)
		wantRefused(t, f.verify(t, time.Second-time.Millisecond, "A"), "the token could not be verified")
		f.wantHits(t, 1)
		if err := f.verify(t, time.Second, "A"); err != nil {
			t.Fatalf("A refused 1s after the failed fetch, the issuer up: %v", err)
		}
		f.wantHits(t, 2)
		// Once a fetch succeeded, an unknown kid waits the full 30s.
		wantRefused(t, f.verify(t, 2*time.Second, "B"), "the token's key is not known")
		wantRefused(t, f.verify(t, 3*time.Second, "B"), "the token's key is not known")
		f.wantHits(t, 2)
	})

	t.Run("issuer never up retries each second", func(t *testing.T) {
		f := newRotationFixture(t, "A")
		f.srv.setStatus(http.StatusInternalServerError)
		for i := range 5 {
			wantRefused(t, f.verify(t, time.Duration(i)*time.Second, "A"), "the token could not be verified")
			wantRefused(t, f.verify(t, time.Duration(i)*time.Second+999*time.Millisecond, "A"), "the token could not be verified")
		}
		f.wantHits(t, 5)
	})

	t.Run("a bad key set is not kept", func(t *testing.T) {
		f := newRotationFixture(t, "A")
		f.srv.set([]byte(`{"keys": [{"kty": "RSA", "kid": "x", "n": "!!", "e": "AQAB"}]}`))
		wantRefused(t, f.verify(t, 0, "A"), "the token could not be verified")
		if n := f.logs.FilterMessage("fetching the JWKS failed").Len(); n != 1 {
			t.Errorf("%d failed fetches logged, want 1", n)
		}
		f.srv.set(f.set(t, "A"))
		if err := f.verify(t, time.Second, "A"); err != nil {
			t.Fatalf("A refused after the set was fixed: %v", err)
		}
		f.wantHits(t, 2)
	})
}

// Concurrent first lookups share one fetch, so a burst of calls at
// start-up does not hammer the issuer.
func TestRemoteKeySetConcurrent(t *testing.T) {
	f := newRotationFixture(t, "A")
	c := jwt.MapClaims{"iss": vIssuer, "aud": vAudience, "exp": f.t0.Add(time.Hour).Unix()}
	tok := signJWT(t, jwt.SigningMethodEdDSA, f.a, "A", c)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			_, err := f.v.Verify(context.Background(), tok)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("refused: %v", err)
		}
	}
	f.wantHits(t, 1)
}

func TestRemoteKeySetLookup(t *testing.T) {
	f := newRotationFixture(t, "A", "B")
	set := NewRemoteKeySet(f.srv.srv.URL, identity.DecodeJWK, nil, nil)
	set.SetClock(f.clock)
	all, err := set.Lookup(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].ID != "A" || all[1].ID != "B" {
		t.Fatalf("Lookup(\"\") = %+v, want keys A and B", all)
	}
	b, err := set.Lookup(context.Background(), "B")
	if err != nil || len(b) != 1 || !f.b.Public().(ed25519.PublicKey).Equal(b[0].Key) {
		t.Fatalf("Lookup(B) = %+v, %v", b, err)
	}
	if !slices.Equal(b[0].Algs, []string{"EdDSA"}) {
		t.Errorf("algs = %v, want [EdDSA]", b[0].Algs)
	}

	// A cancelled caller gets its context's error; the fetch it started
	// goes on for the others.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	other := NewRemoteKeySet(f.srv.srv.URL, identity.DecodeJWK, nil, nil)
	other.SetClock(f.clock)
	if _, err := other.Lookup(ctx, "A"); !errors.Is(err, context.Canceled) {
		t.Errorf("Lookup with a cancelled context = %v, want context.Canceled", err)
	}
	other.idle()
	if a, err := other.Lookup(context.Background(), "A"); err != nil || len(a) != 1 {
		t.Errorf("Lookup(A) after the cancelled one = %+v, %v; want the key its fetch got", a, err)
	}
}

func TestParseJWKS(t *testing.T) {
	k := testSigKeys(t)
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p521, err := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaJWK := pubJWK(t, "rsa", &k.rsa.PublicKey)
	ecJWK := pubJWK(t, "ec", &k.ec.PublicKey)
	edJWK := pubJWK(t, "ed", k.ed.Public())
	b64 := base64.RawURLEncoding.EncodeToString
	rsaAlgs := []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}

	// A point off the curve: a valid x with y + 1.
	ecRaw, err := k.ec.PublicKey.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	yOff := new(big.Int).Add(new(big.Int).SetBytes(ecRaw[33:]), big.NewInt(1))
	offCurve := withJWK(ecJWK, "y", b64(yOff.FillBytes(make([]byte, 32))))

	// Private keys as go-jose writes them, d and all.
	privJWK := func(kid string, priv any) map[string]string {
		b, err := json.Marshal(jose.JSONWebKey{Key: priv, KeyID: kid})
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]string
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	// Moduli of a given size: go-jose reads n without factoring it.
	modulus := func(bits int) *big.Int {
		n := new(big.Int).Lsh(big.NewInt(1), uint(bits-1))
		return n.Add(n, big.NewInt(1))
	}
	rsa4096 := &rsa.PublicKey{N: modulus(4096), E: 65537}
	// The Ed25519 identity point, of order 1.
	lowOrder := append([]byte{1}, make([]byte, 31)...)
	// An Ed25519 key whose x5c certificate is of another key.
	cert, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(1)}, &x509.Certificate{SerialNumber: big.NewInt(1)}, k.otherEd.Public(), k.otherEd)
	if err != nil {
		t.Fatal(err)
	}
	x5cOther, err := json.Marshal(map[string]any{"keys": []any{map[string]any{
		"kty": "OKP", "crv": "Ed25519", "kid": "ed", "x": edJWK["x"], "x5c": []string{base64.StdEncoding.EncodeToString(cert)},
	}}})
	if err != nil {
		t.Fatal(err)
	}

	type want struct {
		kid  string
		algs []string
		key  crypto.PublicKey
	}
	tests := []struct {
		name    string
		data    []byte
		want    []want
		wantErr string
	}{
		{name: "one of each", data: jwksOf(t, rsaJWK, ecJWK, edJWK), want: []want{
			{"rsa", rsaAlgs, &k.rsa.PublicKey},
			{"ec", []string{"ES256"}, &k.ec.PublicKey},
			{"ed", []string{"EdDSA"}, k.ed.Public()},
		}},
		{name: "P-384 and P-521", data: jwksOf(t, pubJWK(t, "384", &p384.PublicKey), pubJWK(t, "521", &p521.PublicKey)), want: []want{
			{"384", []string{"ES384"}, &p384.PublicKey},
			{"521", []string{"ES512"}, &p521.PublicKey},
		}},
		{name: "use sig kept", data: jwksOf(t, withJWK(edJWK, "use", "sig")), want: []want{{"ed", []string{"EdDSA"}, k.ed.Public()}}},
		{name: "use enc skipped", data: jwksOf(t, withJWK(rsaJWK, "use", "enc"), edJWK), want: []want{{"ed", []string{"EdDSA"}, k.ed.Public()}}},
		{name: "malformed enc key skipped", data: jwksOf(t, withJWK(rsaJWK, "use", "enc", "n", "!!"), edJWK), want: []want{{"ed", []string{"EdDSA"}, k.ed.Public()}}},
		{name: "unknown kty skipped", data: jwksOf(t, map[string]string{"kty": "oct", "kid": "h", "k": "c2VjcmV0"}, edJWK), want: []want{{"ed", []string{"EdDSA"}, k.ed.Public()}}},
		{name: "X25519 skipped", data: jwksOf(t, map[string]string{"kty": "OKP", "crv": "X25519", "x": b64(make([]byte, 32))}, edJWK), want: []want{{"ed", []string{"EdDSA"}, k.ed.Public()}}},
		{name: "Ed448 skipped", data: jwksOf(t, map[string]string{"kty": "OKP", "crv": "Ed448", "x": "AA"}, edJWK), want: []want{{"ed", []string{"EdDSA"}, k.ed.Public()}}},
		{name: "secp256k1 skipped", data: jwksOf(t, withJWK(ecJWK, "crv", "secp256k1"), edJWK), want: []want{{"ed", []string{"EdDSA"}, k.ed.Public()}}},
		{name: "empty set", data: []byte(`{"keys": []}`), want: nil},
		{name: "alg narrows RSA", data: jwksOf(t, withJWK(rsaJWK, "alg", "PS256")), want: []want{{"rsa", []string{"PS256"}, &k.rsa.PublicKey}}},
		{name: "alg on EC", data: jwksOf(t, withJWK(ecJWK, "alg", "ES256")), want: []want{{"ec", []string{"ES256"}, &k.ec.PublicKey}}},
		{name: "alg on Ed25519", data: jwksOf(t, withJWK(edJWK, "alg", "EdDSA")), want: []want{{"ed", []string{"EdDSA"}, k.ed.Public()}}},

		{name: "not JSON", data: []byte(`{"keys": [`), wantErr: "JWKS"},
		{name: "keys not an array", data: []byte(`{"keys": {}}`), wantErr: "JWKS"},
		{name: "ES256 on an RSA key", data: jwksOf(t, withJWK(rsaJWK, "alg", "ES256")), wantErr: "alg ES256 does not fit a RSA key"},
		{name: "HS256 on an RSA key", data: jwksOf(t, withJWK(rsaJWK, "alg", "HS256")), wantErr: "alg HS256 does not fit"},
		{name: "ES384 on a P-256 key", data: jwksOf(t, withJWK(ecJWK, "alg", "ES384")), wantErr: "alg ES384 does not fit"},
		{name: "RS256 on an Ed25519 key", data: jwksOf(t, withJWK(edJWK, "alg", "RS256")), wantErr: "alg RS256 does not fit"},
		{name: "none on an Ed25519 key", data: jwksOf(t, withJWK(edJWK, "alg", "none")), wantErr: "alg none does not fit"},
		{name: "RSA 1024 bits", data: jwksOf(t, pubJWK(t, "small", &small.PublicKey)), wantErr: "at least 2048"},
		{name: "RSA n not base64url", data: jwksOf(t, withJWK(rsaJWK, "n", "a+b/")), wantErr: "bad RSA n or e"},
		{name: "RSA n missing", data: jwksOf(t, withJWK(rsaJWK, "n", "")), wantErr: "bad RSA n or e"},
		{name: "RSA e missing", data: jwksOf(t, withJWK(rsaJWK, "e", "")), wantErr: "bad RSA n or e"},
		{name: "RSA e too long", data: jwksOf(t, withJWK(rsaJWK, "e", b64([]byte{1, 0, 0, 0, 1}))), wantErr: "bad RSA n or e"},
		{name: "EC x not padded", data: jwksOf(t, withJWK(ecJWK, "x", b64(make([]byte, 31)))), wantErr: "bad EC x or y"},
		{name: "EC y missing", data: jwksOf(t, withJWK(ecJWK, "y", "")), wantErr: "bad EC x or y"},
		{name: "EC x not base64url", data: jwksOf(t, withJWK(ecJWK, "x", strings.Repeat("=", 43))), wantErr: "bad EC x or y"},
		{name: "EC point not on the curve", data: jwksOf(t, withJWK(ecJWK, "x", b64(big.NewInt(1).FillBytes(make([]byte, 32))), "y", b64(big.NewInt(1).FillBytes(make([]byte, 32))))), wantErr: "bad EC x or y: go-jose/go-jose: invalid EC key, X/Y are not on declared curve"},
		{name: "EC y off by one", data: jwksOf(t, offCurve), wantErr: "bad EC x or y: go-jose/go-jose: invalid EC key, X/Y are not on declared curve"},
		{name: "P-384 coordinates on P-256", data: jwksOf(t, withJWK(pubJWK(t, "x", &p384.PublicKey), "crv", "P-256")), wantErr: "bad EC x or y"},
		{name: "Ed25519 x short", data: jwksOf(t, withJWK(edJWK, "x", b64(make([]byte, 31)))), wantErr: "bad Ed25519 x"},
		{name: "Ed25519 x missing", data: jwksOf(t, withJWK(edJWK, "x", "")), wantErr: "bad Ed25519 x"},
		{name: "bad key after good ones", data: jwksOf(t, edJWK, withJWK(rsaJWK, "kid", "broken", "e", "")), wantErr: `key 1 (kid "broken")`},

		// What go-jose reads but a set of verification keys must not hold.
		{name: "HMAC secret skipped", data: jwksOf(t, map[string]string{"kty": "oct", "kid": "h", "k": "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0", "alg": "HS256", "use": "sig"}, edJWK), want: []want{{"ed", []string{"EdDSA"}, k.ed.Public()}}},
		{name: "no kty skipped", data: jwksOf(t, withJWK(edJWK, "kty", ""), rsaJWK), want: []want{{"rsa", rsaAlgs, &k.rsa.PublicKey}}},
		{name: "member names are case-sensitive", data: jwksOf(t, withJWK(edJWK, "kty", "", "KTY", "OKP"), rsaJWK), want: []want{{"rsa", rsaAlgs, &k.rsa.PublicKey}}},
		{name: "EC without crv skipped", data: jwksOf(t, withJWK(ecJWK, "crv", ""), edJWK), want: []want{{"ed", []string{"EdDSA"}, k.ed.Public()}}},
		{name: "RSA 4096 bits", data: jwksOf(t, pubJWK(t, "big", rsa4096)), want: []want{{"big", rsaAlgs, rsa4096}}},
		{name: "RSA private key", data: jwksOf(t, edJWK, privJWK("rsa", k.rsa)), wantErr: "private members"},
		{name: "EC private key", data: jwksOf(t, privJWK("ec", k.ec)), wantErr: "private members"},
		{name: "Ed25519 private key", data: jwksOf(t, privJWK("ed", k.ed)), wantErr: "private members"},
		{name: "RSA prime without d", data: jwksOf(t, withJWK(rsaJWK, "p", privJWK("rsa", k.rsa)["p"])), wantErr: "private members"},
		{name: "private key marked enc skipped", data: jwksOf(t, withJWK(privJWK("rsa", k.rsa), "use", "enc"), edJWK), want: []want{{"ed", []string{"EdDSA"}, k.ed.Public()}}},
		{name: "RSA 8192 bits", data: jwksOf(t, pubJWK(t, "huge", &rsa.PublicKey{N: modulus(8192), E: 65537})), wantErr: "bad RSA n or e: go-jose/go-jose: invalid RSA key, modulus too large"},
		{name: "RSA e zero", data: jwksOf(t, withJWK(rsaJWK, "e", "AA")), wantErr: "bad RSA n or e: not a public key"},
		{name: "RSA e of 8 bytes", data: jwksOf(t, withJWK(rsaJWK, "e", b64([]byte{0, 0, 0, 1, 0, 0, 0, 1}))), wantErr: "e is longer than 4 bytes"},
		{name: "RSA e of 9 bytes, 65537 in the low 8", data: jwksOf(t, withJWK(rsaJWK, "e", b64([]byte{1, 0, 0, 0, 0, 0, 1, 0, 1}))), wantErr: "e is longer than 4 bytes"},
		{name: "RSA e of 4 bytes", data: jwksOf(t, withJWK(rsaJWK, "e", b64([]byte{0, 1, 0, 1}))), want: []want{{"rsa", rsaAlgs, &k.rsa.PublicKey}}},
		{name: "Ed25519 low-order point", data: jwksOf(t, withJWK(edJWK, "x", b64(lowOrder))), wantErr: "bad Ed25519 x: go-jose/go-jose: invalid Ed25519 public key, low-order point"},
		{name: "x5c of another key", data: x5cOther, wantErr: "do not match"},
		{name: "duplicate member", data: []byte(`{"keys": [{"kty": "OKP", "kty": "RSA", "crv": "Ed25519", "x": "` + edJWK["x"] + `"}]}`), wantErr: "duplicate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The component kit's decoder (jwkset) keeps what the
			// gateway's keeps and refuses what it refuses, but for what
			// only go-jose checks.
			kit, kitErr := ParseJWKS(tt.data, nil)
			switch {
			case tt.wantErr == "" && kitErr != nil:
				t.Errorf("DecodeJWK refused it: %v", kitErr)
			case tt.wantErr == "" && len(kit) != len(tt.want):
				t.Errorf("DecodeJWK kept %d keys, want %d", len(kit), len(tt.want))
			case tt.wantErr != "" && kitErr == nil && !goJoseOnly[tt.name]:
				t.Errorf("DecodeJWK accepted it: %+v", kit)
			}
			got, err := ParseJWKS(tt.data, identity.DecodeJWK)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseJWKS accepted it: %+v", got)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %q does not say %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseJWKS: %v", err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d keys %+v, want %d", len(got), got, len(tt.want))
			}
			for i, w := range tt.want {
				g := got[i]
				if g.ID != w.kid || !slices.Equal(g.Algs, w.algs) {
					t.Errorf("key %d = kid %q algs %v, want kid %q algs %v", i, g.ID, g.Algs, w.kid, w.algs)
				}
				eq, ok := w.key.(interface{ Equal(crypto.PublicKey) bool })
				if !ok || !eq.Equal(g.Key) {
					t.Errorf("key %d = %#v, want the original key", i, g.Key)
				}
			}
		})
	}
}

// A JWKS written by the issuer itself parses back.
func TestParseJWKSOfIssuer(t *testing.T) {
	var k1, k2 identity.Key
	var err error
	if k1, err = identity.GenerateKey(); err == nil {
		k2, err = identity.GenerateKey()
	}
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseJWKS(identity.NewIssuer("toolgate", 0, k1, k2).JWKS(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != k1.ID || got[1].ID != k2.ID {
		t.Fatalf("got %+v", got)
	}
	if !k1.Public().Equal(got[0].Key) || !slices.Equal(got[0].Algs, []string{"EdDSA"}) {
		t.Errorf("key 0 = %+v", got[0])
	}
}

// A signature has one spelling: base64url with its spare bits set decodes
// to the same bytes, and would let one token pass as many (a replay cache
// or a per-token count keyed by the text could be dodged).
func TestVerifierOneSpelling(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	v, err := NewSecretVerifier(secret, Options{})
	if err != nil {
		t.Fatal(err)
	}
	v.SetClock(clock.NewManual(vNow))
	tok := signJWT(t, jwt.SigningMethodHS256, secret, "", baseClaims())
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatalf("the token as signed: %v", err)
	}
	// HS256's 32 bytes are 43 characters, whose last holds 2 spare bits.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, tok[len(tok)-1])
	respelled := tok[:len(tok)-1] + string(alphabet[last^1])
	sig := respelled[strings.LastIndexByte(respelled, '.')+1:]
	if b, err := base64.RawURLEncoding.DecodeString(sig); err != nil || len(b) != 32 {
		t.Fatalf("the respelled signature does not decode leniently: %v", err)
	}
	_, err = v.Verify(context.Background(), respelled)
	wantRefused(t, err, "")
}

// goJoseOnly are the cases of TestParseJWKS that only go-jose refuses:
// keys that read as keys, refused by its extra checks. A component reads
// only its own toolgate's set, which holds neither.
var goJoseOnly = map[string]bool{"RSA 8192 bits": true, "Ed25519 low-order point": true}
