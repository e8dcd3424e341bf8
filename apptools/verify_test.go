package apptools_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"github.com/go-json-experiment/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/toolgate/toolgate/apptools"
	"github.com/toolgate/toolgate/internal/verify"
)

const testKid = "k1"

// fakeToolgate publishes one Ed25519 key the way toolgate's
// /.well-known/jwks.json does, and counts the fetches.
type fakeToolgate struct {
	key     ed25519.PrivateKey
	url     string
	fetches atomic.Int32
}

func newFakeToolgate(t *testing.T) *fakeToolgate {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeToolgate{key: priv}
	jwks, err := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "OKP", "crv": "Ed25519", "x": base64.RawURLEncoding.EncodeToString(pub),
		"kid": testKid, "alg": "EdDSA", "use": "sig",
	}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write(jwks)
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL + "/.well-known/jwks.json"
	return f
}

// claims are those toolgate signs for user u_1 at install in_1, calling the
// bookmarks component.
func claims() jwt.MapClaims {
	now := time.Now().Unix()
	return jwt.MapClaims{"iss": "toolgate", "sub": "u_1", "install": "in_1", "aud": "bookmarks", "iat": now, "exp": now + 300}
}

func sign(t *testing.T, key ed25519.PrivateKey, kid string, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func with(c jwt.MapClaims, key string, v any) jwt.MapClaims {
	if v == nil {
		delete(c, key)
	} else {
		c[key] = v
	}
	return c
}

func otherKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return priv
}

type verifyCase struct {
	name   string
	auth   []string // Authorization header values
	want   apptools.Identity
	errIs  error // nil: accepted
	errHas string
}

func verifyCases(t *testing.T, f *fakeToolgate) []verifyCase {
	now := time.Now().Unix()
	good := sign(t, f.key, testKid, claims())
	pub := f.key.Public().(ed25519.PublicKey)

	none := jwt.NewWithClaims(jwt.SigningMethodNone, claims())
	none.Header["kid"] = testKid
	noneTok, err := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	// The public key used as an HMAC secret: the classic algorithm confusion.
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, claims())
	hs.Header["kid"] = testKid
	hsTok, err := hs.SignedString([]byte(pub))
	if err != nil {
		t.Fatal(err)
	}

	u1 := apptools.Identity{User: "u_1", Install: "in_1"}
	return []verifyCase{
		{"good", []string{"Bearer " + good}, u1, nil, ""},
		{"good, scheme in lower case", []string{"bearer " + good}, u1, nil, ""},
		{"good, no install", []string{"Bearer " + sign(t, f.key, testKid, with(claims(), "install", nil))}, apptools.Identity{User: "u_1"}, nil, ""},
		{"good, exp just past within the clock skew", []string{"Bearer " + sign(t, f.key, testKid, with(claims(), "exp", now-5))}, u1, nil, ""},

		{"missing", nil, apptools.Identity{}, apptools.ErrNoToken, "no bearer token"},
		{"empty header", []string{""}, apptools.Identity{}, apptools.ErrNoToken, "no bearer token"},
		{"another scheme", []string{"Basic dTpw"}, apptools.Identity{}, apptools.ErrNoToken, "no bearer token"},
		{"bearer without token", []string{"Bearer "}, apptools.Identity{}, apptools.ErrNoToken, "no bearer token"},
		{"two headers", []string{"Bearer " + good, "Bearer " + good}, apptools.Identity{}, apptools.ErrInvalidToken, "2 Authorization headers"},
		{"space in the token", []string{"Bearer " + good + " x"}, apptools.Identity{}, apptools.ErrInvalidToken, "malformed Authorization header"},
		{"garbage", []string{"Bearer not-a-jwt"}, apptools.Identity{}, apptools.ErrInvalidToken, "malformed"},
		{"forged: another key, same kid", []string{"Bearer " + sign(t, otherKey(t), testKid, claims())}, apptools.Identity{}, apptools.ErrInvalidToken, "signature does not verify"},
		{"another key, unknown kid", []string{"Bearer " + sign(t, otherKey(t), "k2", claims())}, apptools.Identity{}, apptools.ErrInvalidToken, "the token's key is not known"},
		{"payload altered", []string{"Bearer " + alter(good)}, apptools.Identity{}, apptools.ErrInvalidToken, "signature does not verify"},
		{"alg none", []string{"Bearer " + noneTok}, apptools.Identity{}, apptools.ErrInvalidToken, ""},
		{"HS256 with the public key", []string{"Bearer " + hsTok}, apptools.Identity{}, apptools.ErrInvalidToken, ""},
		{"expired", []string{"Bearer " + sign(t, f.key, testKid, with(claims(), "exp", now-3600))}, apptools.Identity{}, apptools.ErrInvalidToken, "expired"},
		{"no exp", []string{"Bearer " + sign(t, f.key, testKid, with(claims(), "exp", nil))}, apptools.Identity{}, apptools.ErrInvalidToken, "required claim (exp)"},
		{"issued in the future", []string{"Bearer " + sign(t, f.key, testKid, with(claims(), "iat", now+3600))}, apptools.Identity{}, apptools.ErrInvalidToken, "not valid yet"},
		{"another component's token", []string{"Bearer " + sign(t, f.key, testKid, with(claims(), "aud", "notes"))}, apptools.Identity{}, apptools.ErrInvalidToken, "audience"},
		{"audience list without ours", []string{"Bearer " + sign(t, f.key, testKid, with(claims(), "aud", []string{"notes", "mail"}))}, apptools.Identity{}, apptools.ErrInvalidToken, "audience"},
		{"no audience", []string{"Bearer " + sign(t, f.key, testKid, with(claims(), "aud", nil))}, apptools.Identity{}, apptools.ErrInvalidToken, "required claim (aud)"},
		{"wrong issuer", []string{"Bearer " + sign(t, f.key, testKid, with(claims(), "iss", "someone-else"))}, apptools.Identity{}, apptools.ErrInvalidToken, "issuer"},
		{"no issuer", []string{"Bearer " + sign(t, f.key, testKid, with(claims(), "iss", nil))}, apptools.Identity{}, apptools.ErrInvalidToken, "required claim (iss)"},
		{"no sub", []string{"Bearer " + sign(t, f.key, testKid, with(claims(), "sub", nil))}, apptools.Identity{}, apptools.ErrInvalidToken, "names no user (sub)"},
		{"empty sub", []string{"Bearer " + sign(t, f.key, testKid, with(claims(), "sub", ""))}, apptools.Identity{}, apptools.ErrInvalidToken, "names no user (sub)"},
		{"install not a string", []string{"Bearer " + sign(t, f.key, testKid, with(claims(), "install", 7))}, apptools.Identity{}, apptools.ErrInvalidToken, "install is not a string"},
	}
}

// alter replaces the payload of a token with another user's, keeping the
// signature.
func alter(token string) string {
	parts := strings.Split(token, ".")
	c := claims()
	c["sub"] = "u_2"
	b, _ := json.Marshal(c)
	parts[1] = base64.RawURLEncoding.EncodeToString(b)
	return strings.Join(parts, ".")
}

func request(auth []string) *http.Request {
	r := httptest.NewRequest("POST", "/bookmarks", strings.NewReader(`{}`))
	for _, a := range auth {
		r.Header.Add("Authorization", a)
	}
	return r
}

func TestVerify(t *testing.T) {
	f := newFakeToolgate(t)
	v := apptools.NewVerifier(f.url, "toolgate", "bookmarks")
	for _, tt := range verifyCases(t, f) {
		t.Run(tt.name, func(t *testing.T) {
			id, err := v.Verify(request(tt.auth))
			if tt.errIs == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if id.User != tt.want.User || id.Install != tt.want.Install || id.Component != "bookmarks" {
					t.Errorf("identity %+v, want %+v", id, tt.want)
				}
				if id.Claims["aud"] != "bookmarks" || id.Claims["iss"] != "toolgate" {
					t.Errorf("claims %v", id.Claims)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted as %+v", id)
			}
			if !errors.Is(err, tt.errIs) || !strings.Contains(err.Error(), tt.errHas) {
				t.Errorf("error %q, want %v holding %q", err, tt.errIs, tt.errHas)
			}
			if id.User != "" || id.Install != "" || id.Claims != nil {
				t.Errorf("identity %+v beside an error", id)
			}
		})
	}
}

func TestMiddleware(t *testing.T) {
	f := newFakeToolgate(t)
	v := apptools.NewVerifier(f.url, "toolgate", "bookmarks")
	for _, tt := range verifyCases(t, f) {
		t.Run(tt.name, func(t *testing.T) {
			var got *apptools.Identity
			h := v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				id, ok := apptools.FromContext(r.Context())
				if !ok {
					t.Error("no identity in the context")
				}
				got = &id
				apptools.WriteText(w, http.StatusOK, "ok")
			}))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, request(tt.auth))

			if tt.errIs == nil {
				if rec.Code != http.StatusOK || got == nil || got.User != tt.want.User || got.Install != tt.want.Install {
					t.Fatalf("status %d, identity %+v, body %s", rec.Code, got, rec.Body)
				}
				if h := rec.Header().Get("WWW-Authenticate"); h != "" {
					t.Errorf("WWW-Authenticate %q on success", h)
				}
				return
			}
			if got != nil {
				t.Fatalf("the handler ran for a refused request, with %+v", *got)
			}
			if rec.Code != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", rec.Code)
			}
			wantChallenge := `Bearer error="invalid_token"`
			if tt.errIs == apptools.ErrNoToken {
				wantChallenge = "Bearer"
			}
			if h := rec.Header().Get("WWW-Authenticate"); h != wantChallenge {
				t.Errorf("WWW-Authenticate %q, want %q", h, wantChallenge)
			}
			_, verr := v.Verify(request(tt.auth))
			want, _ := json.Marshal(map[string]string{"code": "unauthorized", "error": verr.Error()}, json.Deterministic(true))
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" || strings.TrimSpace(rec.Body.String()) != string(want) {
				t.Errorf("answer %q %s, want %s", ct, rec.Body, want)
			}
		})
	}
}

func TestVerifierFetchesKeysLazily(t *testing.T) {
	f := newFakeToolgate(t)
	v := apptools.NewVerifier(f.url, "toolgate", "bookmarks")
	if n := f.fetches.Load(); n != 0 {
		t.Fatalf("NewVerifier fetched the JWKS %d times", n)
	}
	good := []string{"Bearer " + sign(t, f.key, testKid, claims())}
	for i := 0; i < 3; i++ {
		if _, err := v.Verify(request(good)); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.fetches.Load(); n != 1 {
		t.Errorf("JWKS fetched %d times for three calls, want 1", n)
	}
	if _, err := v.Verify(request(nil)); !errors.Is(err, apptools.ErrNoToken) {
		t.Fatal(err)
	}
}

func TestVerifierDefaultIssuer(t *testing.T) {
	f := newFakeToolgate(t)
	v := apptools.NewVerifier(f.url, "", "bookmarks")
	if _, err := v.Verify(request([]string{"Bearer " + sign(t, f.key, testKid, claims())})); err != nil {
		t.Errorf("iss toolgate refused: %v", err)
	}
	_, err := v.Verify(request([]string{"Bearer " + sign(t, f.key, testKid, with(claims(), "iss", "other"))}))
	if !errors.Is(err, apptools.ErrInvalidToken) || !strings.Contains(err.Error(), "issuer") {
		t.Errorf("iss other: %v", err)
	}
}

func TestVerifierWithoutAudienceRefusesAll(t *testing.T) {
	f := newFakeToolgate(t)
	v := apptools.NewVerifier(f.url, "toolgate", "")
	_, err := v.Verify(request([]string{"Bearer " + sign(t, f.key, testKid, claims())}))
	if err == nil || !strings.Contains(err.Error(), "no audience") || v.Err() != err {
		t.Errorf("error %v, want a refusal naming the missing audience", err)
	}
	if f.fetches.Load() != 0 {
		t.Errorf("the JWKS was fetched")
	}
}

// A JWKS fetched in the clear from another machine can be replaced on the
// way: such a verifier fetches nothing and refuses every token.
func TestVerifierInsecureJWKS(t *testing.T) {
	f := newFakeToolgate(t)
	for _, u := range []string{"http://toolgate.internal/.well-known/jwks.json", "http://10.0.0.5:8080/jwks", "http://127.0.0.1.nip.io/jwks",
		"ftp://127.0.0.1/jwks", "/.well-known/jwks.json", "https://user:pw@toolgate.example/jwks"} {
		v := apptools.NewVerifier(u, "toolgate", "bookmarks")
		if v.Err() == nil || !strings.Contains(v.Err().Error(), "jwks URL") {
			t.Errorf("%s: Err %v, want a refusal of the URL", u, v.Err())
		}
		if _, err := v.Verify(request([]string{"Bearer " + sign(t, f.key, testKid, claims())})); err == nil {
			t.Errorf("%s: a token verified", u)
		}
	}
	for _, u := range []string{f.url, "https://toolgate.example/.well-known/jwks.json", "http://localhost:8080/jwks", "http://[::1]/jwks"} {
		if err := apptools.NewVerifier(u, "toolgate", "bookmarks").Err(); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}

func TestVerifierJWKSUnavailable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	v := apptools.NewVerifier(srv.URL, "toolgate", "bookmarks")
	_, err := v.Verify(request([]string{"Bearer " + sign(t, otherKey(t), testKid, claims())}))
	// The refusal may reach the model through toolgate: it says the
	// token could not be verified, never what the JWKS fetch met.
	if !errors.Is(err, apptools.ErrInvalidToken) || !errors.Is(err, verify.ErrKeysUnavailable) || strings.Contains(err.Error(), "503") || strings.Contains(err.Error(), srv.URL) {
		t.Errorf("error %v, want a refusal for an unavailable key set, without the fetch's error", err)
	}
}

func TestFromContextEmpty(t *testing.T) {
	if id, ok := apptools.FromContext(context.Background()); ok || id.User != "" {
		t.Errorf("FromContext of a bare context: %+v, %v", id, ok)
	}
}
