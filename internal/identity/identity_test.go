package identity

import (
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
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/golang-jwt/jwt/v5"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/jsonread"
)

// RFC 8037 appendix A: the example Ed25519 key and its RFC 7638 thumbprint.
const (
	rfcSeed       = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A" // A.1 "d"
	rfcX          = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo" // A.1/A.2 "x"
	rfcThumbprint = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k" // A.3
)

func mustB64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("decoding %q: %v", s, err)
	}
	return b
}

func mustGenerateKey(t *testing.T) Key {
	t.Helper()
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// verify parses tok the way a component would: EdDSA only, the key picked
// by kid from the published set, at the given time.
func verifyIdentityToken(t *testing.T, tok string, at time.Time, keys []Key, opts ...jwt.ParserOption) (*jwt.Token, *Claims, error) {
	t.Helper()
	opts = append([]jwt.ParserOption{
		jwt.WithValidMethods([]string{"EdDSA"}),
		jwt.WithTimeFunc(func() time.Time { return at }),
	}, opts...)
	claims := &Claims{}
	parsed, err := jwt.NewParser(opts...).ParseWithClaims(tok, claims, func(tk *jwt.Token) (any, error) {
		kid, _ := tk.Header["kid"].(string)
		for _, k := range keys {
			if k.ID == kid {
				return k.Public(), nil
			}
		}
		return nil, errors.New("unknown kid")
	})
	return parsed, claims, err
}

// segment decodes one part of a compact JWT as a JSON object.
func tokenPart(t *testing.T, tok string, i int) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("token has %d parts, want 3", len(parts))
	}
	v, err := jsonread.Value(jsontext.NewDecoder(strings.NewReader(string(mustB64(t, parts[i])))))
	m, ok := v.(map[string]any)
	if err != nil || !ok {
		t.Fatalf("decoding token part %d: %v, %T", i, err, v)
	}
	return m
}

func TestToken(t *testing.T) {
	key := mustGenerateKey(t)
	// Not on a second boundary: iat must be truncated to whole seconds.
	now := time.Date(2031, 5, 17, 10, 20, 30, 700_000_000, time.UTC)
	tests := []struct {
		name     string
		issuer   string
		ttl      time.Duration
		user     string
		install  string
		audience string
		wantTTL  time.Duration
	}{
		{name: "default ttl", issuer: "https://gw.example", user: "user_1", install: "inst_1", audience: "notes", wantTTL: 5 * time.Minute},
		{name: "negative ttl takes default", issuer: "https://gw.example", ttl: -time.Minute, user: "u", install: "i", audience: "notes", wantTTL: DefaultTTL},
		{name: "one minute", issuer: "toolgate", ttl: time.Minute, user: "u", install: "i", audience: "billing", wantTTL: time.Minute},
		{name: "ninety seconds", issuer: "toolgate", ttl: 90 * time.Second, user: "u@example.com", install: "i", audience: "api", wantTTL: 90 * time.Second},
		{name: "sub-second ttl rounds up", issuer: "toolgate", ttl: 500 * time.Millisecond, user: "u", install: "i", audience: "api", wantTTL: time.Second},
		{name: "fractional ttl rounds up", issuer: "toolgate", ttl: 1500 * time.Millisecond, user: "u", install: "i", audience: "api", wantTTL: 2 * time.Second},
		{name: "no install", issuer: "toolgate", user: "u", audience: "api", wantTTL: DefaultTTL},
		{name: "unicode user", issuer: "toolgate", user: "kullanıcı", install: "kurulum", audience: "api", wantTTL: DefaultTTL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			iss := NewIssuer(tt.issuer, tt.ttl, key)
			iss.SetClock(clock.NewManual(now))
			tok, err := iss.Token(tt.user, tt.install, tt.audience)
			if err != nil {
				t.Fatalf("Token: %v", err)
			}
			parsed, claims, err := verifyIdentityToken(t, tok, now, []Key{key},
				jwt.WithAudience(tt.audience), jwt.WithIssuer(tt.issuer), jwt.WithSubject(tt.user),
				jwt.WithIssuedAt(), jwt.WithExpirationRequired())
			if err != nil {
				t.Fatalf("verifying the token: %v", err)
			}
			if !parsed.Valid {
				t.Fatal("token not valid")
			}
			if parsed.Method.Alg() != "EdDSA" {
				t.Errorf("alg = %q, want EdDSA", parsed.Method.Alg())
			}
			if kid := parsed.Header["kid"]; kid != key.ID {
				t.Errorf("kid = %v, want %q", kid, key.ID)
			}
			if typ := parsed.Header["typ"]; typ != "JWT" {
				t.Errorf("typ = %v, want JWT", typ)
			}
			if claims.Issuer != tt.issuer || claims.Subject != tt.user || claims.Install != tt.install {
				t.Errorf("iss, sub, install = %q, %q, %q; want %q, %q, %q", claims.Issuer, claims.Subject, claims.Install, tt.issuer, tt.user, tt.install)
			}
			if len(claims.Audience) != 1 || claims.Audience[0] != tt.audience {
				t.Errorf("aud = %q, want [%q]", claims.Audience, tt.audience)
			}
			wantIat := now.Truncate(time.Second)
			if claims.IssuedAt == nil || !claims.IssuedAt.Time.Equal(wantIat) {
				t.Errorf("iat = %v, want %v", claims.IssuedAt, wantIat)
			}
			if claims.ExpiresAt == nil || claims.ExpiresAt.Time.Sub(wantIat) != tt.wantTTL {
				t.Errorf("exp = %v, want iat + %v", claims.ExpiresAt, tt.wantTTL)
			}
			if claims.NotBefore != nil || claims.ID != "" {
				t.Errorf("unexpected nbf %v or jti %q", claims.NotBefore, claims.ID)
			}

			// The payload as a component's own JWT library reads it.
			payload := tokenPart(t, tok, 1)
			if aud, ok := payload["aud"].(string); !ok || aud != tt.audience {
				t.Errorf("payload aud = %#v, want the string %q", payload["aud"], tt.audience)
			}
			if _, ok := payload["iat"].(jsonread.Number); !ok {
				t.Errorf("payload iat = %#v, want a number", payload["iat"])
			}
			if n, ok := payload["iat"].(jsonread.Number); ok && n.String() != strconv.FormatInt(now.Unix(), 10) {
				t.Errorf("payload iat = %s, want whole seconds %d", n, now.Unix())
			}
			if _, has := payload["install"]; has != (tt.install != "") {
				t.Errorf("payload install present = %v, want %v", has, tt.install != "")
			}
			for k := range payload {
				switch k {
				case "iss", "sub", "aud", "iat", "exp", "install":
				default:
					t.Errorf("unexpected claim %q", k)
				}
			}
		})
	}
}

func TestTokenRefused(t *testing.T) {
	key, other := mustGenerateKey(t), mustGenerateKey(t)
	now := time.Date(2031, 5, 17, 10, 20, 30, 0, time.UTC)
	iss := NewIssuer("toolgate", time.Minute, key)
	iss.SetClock(clock.NewManual(now))
	tok, err := iss.Token("u", "i", "notes")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tok, ".")

	// A token whose payload names another user, signature unchanged.
	forged := tokenPart(t, tok, 1)
	forged["sub"] = "admin"
	forgedPayload, _ := json.Marshal(forged)
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(forgedPayload) + "." + parts[2]

	// The same claims, unsigned.
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT","kid":"`+key.ID+`"}`)) + "." + parts[1] + "."

	// The same claims signed by another key that claims this key's kid.
	otherIss := NewIssuer("toolgate", time.Minute, Key{ID: key.ID, Private: other.Private})
	otherIss.SetClock(clock.NewManual(now))
	wrongKey, err := otherIss.Token("u", "i", "notes")
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		tok     string
		at      time.Time
		keys    []Key
		opts    []jwt.ParserOption
		wantErr error
	}{
		{name: "valid control", tok: tok, at: now, keys: []Key{key}},
		{name: "valid until exp", tok: tok, at: now.Add(59 * time.Second), keys: []Key{key}},
		{name: "expired", tok: tok, at: now.Add(61 * time.Second), keys: []Key{key}, wantErr: jwt.ErrTokenExpired},
		{name: "wrong audience", tok: tok, at: now, keys: []Key{key}, opts: []jwt.ParserOption{jwt.WithAudience("billing")}, wantErr: jwt.ErrTokenInvalidAudience},
		{name: "wrong issuer", tok: tok, at: now, keys: []Key{key}, opts: []jwt.ParserOption{jwt.WithIssuer("someone")}, wantErr: jwt.ErrTokenInvalidIssuer},
		{name: "tampered payload", tok: tampered, at: now, keys: []Key{key}, wantErr: jwt.ErrTokenSignatureInvalid},
		{name: "alg none", tok: none, at: now, keys: []Key{key}, wantErr: jwt.ErrTokenSignatureInvalid},
		{name: "signed by another key", tok: wrongKey, at: now, keys: []Key{key}, wantErr: jwt.ErrTokenSignatureInvalid},
		{name: "kid not published", tok: tok, at: now, keys: []Key{other}, wantErr: jwt.ErrTokenUnverifiable},
		{name: "method not allowed", tok: tok, at: now, keys: []Key{key}, opts: []jwt.ParserOption{jwt.WithValidMethods([]string{"RS256"})}, wantErr: jwt.ErrTokenSignatureInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := verifyIdentityToken(t, tt.tok, tt.at, tt.keys, tt.opts...)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("verify: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("verify succeeded, want %v", tt.wantErr)
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("verify error %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestJWKS(t *testing.T) {
	k1, k2 := mustGenerateKey(t), mustGenerateKey(t)
	tests := []struct {
		name string
		keys []Key
	}{
		{name: "none", keys: nil},
		{name: "one", keys: []Key{k1}},
		{name: "two in order", keys: []Key{k2, k1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := JWKS(tt.keys...)
			var set struct {
				Keys []map[string]any `json:"keys"`
			}
			if err := json.Unmarshal(raw, &set); err != nil {
				t.Fatalf("JWKS is not JSON: %v: %s", err, raw)
			}
			if set.Keys == nil {
				t.Fatalf(`JWKS %s: "keys" must be an array, even empty`, raw)
			}
			if len(set.Keys) != len(tt.keys) {
				t.Fatalf("JWKS has %d keys, want %d", len(set.Keys), len(tt.keys))
			}
			for i, jwk := range set.Keys {
				k := tt.keys[i]
				want := map[string]string{"kty": "OKP", "crv": "Ed25519", "kid": k.ID, "alg": "EdDSA", "use": "sig"}
				for f, v := range want {
					if jwk[f] != v {
						t.Errorf("key %d: %s = %v, want %q", i, f, jwk[f], v)
					}
				}
				for f := range jwk {
					if _, ok := want[f]; !ok && f != "x" {
						t.Errorf("key %d: unexpected member %q (a JWKS publishes public keys only)", i, f)
					}
				}
				x, _ := jwk["x"].(string)
				pub := mustB64(t, x)
				if !ed25519.PublicKey(pub).Equal(k.Public()) {
					t.Errorf("key %d: x decodes to %x, want the public key %x", i, pub, k.Public())
				}
				if got := thumbprint(pub); got != jwk["kid"] {
					t.Errorf("key %d: kid %v is not the thumbprint %s of x", i, jwk["kid"], got)
				}
			}
		})
	}
}

// TestJWKSVerifies checks a token end to end: signed by the issuer, checked
// with nothing but the published JWKS.
func TestJWKSVerifies(t *testing.T) {
	old, cur := mustGenerateKey(t), mustGenerateKey(t)
	published := JWKS(old, cur)
	var set struct {
		Keys []struct {
			Kid string `json:"kid"`
			X   string `json:"x"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(published, &set); err != nil {
		t.Fatal(err)
	}
	keyfunc := func(tk *jwt.Token) (any, error) {
		for _, k := range set.Keys {
			if k.Kid == tk.Header["kid"] {
				x, err := base64.RawURLEncoding.DecodeString(k.X)
				return ed25519.PublicKey(x), err
			}
		}
		return nil, errors.New("unknown kid")
	}
	tests := []struct {
		name string
		key  Key
	}{
		{name: "current key", key: cur},
		{name: "old key still verifies", key: old},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := NewIssuer("toolgate", 0, tt.key).Token("u", "i", "notes")
			if err != nil {
				t.Fatal(err)
			}
			claims := &Claims{}
			if _, err := jwt.NewParser(jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithAudience("notes")).ParseWithClaims(tok, claims, keyfunc); err != nil {
				t.Fatalf("verifying with the JWKS: %v", err)
			}
			if claims.Subject != "u" {
				t.Errorf("sub = %q, want u", claims.Subject)
			}
		})
	}
}

func TestThumbprintRFC8037(t *testing.T) {
	seed := mustB64(t, rfcSeed)
	tests := []struct {
		name string
		got  func() string
	}{
		{name: "thumbprint of x", got: func() string { return thumbprint(ed25519.PublicKey(mustB64(t, rfcX))) }},
		{name: "NewKey from the private key", got: func() string { return NewKey(ed25519.NewKeyFromSeed(seed)).ID }},
		{name: "after a PEM round trip", got: func() string {
			data, err := NewKey(ed25519.NewKeyFromSeed(seed)).MarshalPEM()
			if err != nil {
				t.Fatal(err)
			}
			k, err := ParsePEM(data)
			if err != nil {
				t.Fatal(err)
			}
			return k.ID
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.got(); got != rfcThumbprint {
				t.Errorf("thumbprint = %q, want RFC 8037 A.3's %q", got, rfcThumbprint)
			}
		})
	}
	k := NewKey(ed25519.NewKeyFromSeed(seed))
	if got := base64.RawURLEncoding.EncodeToString(k.Public()); got != rfcX {
		t.Errorf("public key x = %q, want RFC 8037 A.2's %q", got, rfcX)
	}
}

// The published set of RFC 8037's example key, member by member: what the
// browser client, apptools and the node kit read.
func TestJWKSRFC8037(t *testing.T) {
	raw := JWKS(NewKey(ed25519.NewKeyFromSeed(mustB64(t, rfcSeed))))
	var got map[string][]map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("JWKS is not JSON: %v: %s", err, raw)
	}
	want := map[string][]map[string]any{"keys": {{
		"kty": "OKP", "crv": "Ed25519", "x": rfcX, "kid": rfcThumbprint, "alg": "EdDSA", "use": "sig",
	}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("JWKS = %s, want %v", raw, want)
	}
}

func TestKeyID(t *testing.T) {
	a, b := mustGenerateKey(t), mustGenerateKey(t)
	tests := []struct {
		name string
		x, y string
		same bool
	}{
		{name: "same key twice", x: NewKey(a.Private).ID, y: NewKey(a.Private).ID, same: true},
		{name: "same key from a copy", x: a.ID, y: NewKey(append(ed25519.PrivateKey(nil), a.Private...)).ID, same: true},
		{name: "two keys", x: a.ID, y: b.ID, same: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if (tt.x == tt.y) != tt.same {
				t.Errorf("ids %q and %q: equal = %v, want %v", tt.x, tt.y, tt.x == tt.y, tt.same)
			}
			for _, id := range []string{tt.x, tt.y} {
				if len(id) != 43 || strings.ContainsAny(id, "+/=") {
					t.Errorf("id %q is not an unpadded base64url SHA-256", id)
				}
			}
		})
	}
}

func TestPEMRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		key  Key
	}{
		{name: "generated", key: mustGenerateKey(t)},
		{name: "RFC 8037 key", key: NewKey(ed25519.NewKeyFromSeed(mustB64(t, rfcSeed)))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := tt.key.MarshalPEM()
			if err != nil {
				t.Fatal(err)
			}
			block, rest := pem.Decode(data)
			if block == nil || block.Type != "PRIVATE KEY" || len(strings.TrimSpace(string(rest))) != 0 {
				t.Fatalf("MarshalPEM wrote %q, want one PKCS #8 PRIVATE KEY block", data)
			}
			got, err := ParsePEM(data)
			if err != nil {
				t.Fatalf("ParsePEM: %v", err)
			}
			if got.ID != tt.key.ID {
				t.Errorf("ID = %q after the round trip, want %q", got.ID, tt.key.ID)
			}
			if !got.Private.Equal(tt.key.Private) {
				t.Errorf("private key changed in the round trip")
			}
		})
	}
}

func TestParsePEMRefused(t *testing.T) {
	pemOf := func(typ string, der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}) }
	must := func(der []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	xKey, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	edKey := mustGenerateKey(t)
	edDER := must(x509.MarshalPKCS8PrivateKey(edKey.Private))

	tests := []struct {
		name    string
		data    []byte
		wantErr string
	}{
		{name: "RSA PKCS #8", data: pemOf("PRIVATE KEY", must(x509.MarshalPKCS8PrivateKey(rsaKey))), wantErr: "Ed25519"},
		{name: "EC PKCS #8", data: pemOf("PRIVATE KEY", must(x509.MarshalPKCS8PrivateKey(ecKey))), wantErr: "Ed25519"},
		{name: "X25519 PKCS #8", data: pemOf("PRIVATE KEY", must(x509.MarshalPKCS8PrivateKey(xKey))), wantErr: "Ed25519"},
		{name: "RSA PKCS #1", data: pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey)), wantErr: "PRIVATE KEY"},
		{name: "EC SEC 1", data: pemOf("EC PRIVATE KEY", must(x509.MarshalECPrivateKey(ecKey))), wantErr: "PRIVATE KEY"},
		{name: "Ed25519 under another PEM type", data: pemOf("ED25519 PRIVATE KEY", edDER), wantErr: "PRIVATE KEY"},
		{name: "Ed25519 as OpenSSH type", data: pemOf("OPENSSH PRIVATE KEY", edDER), wantErr: "PRIVATE KEY"},
		{name: "public key", data: pemOf("PUBLIC KEY", must(x509.MarshalPKIXPublicKey(edKey.Public()))), wantErr: "PRIVATE KEY"},
		{name: "certificate type", data: pemOf("CERTIFICATE", edDER), wantErr: "PRIVATE KEY"},
		{name: "garbage DER", data: pemOf("PRIVATE KEY", []byte("not DER at all")), wantErr: ""},
		{name: "truncated DER", data: pemOf("PRIVATE KEY", edDER[:len(edDER)-4]), wantErr: ""},
		{name: "garbage text", data: []byte("this is not a key"), wantErr: "no PEM block"},
		{name: "empty", data: nil, wantErr: "no PEM block"},
		{name: "raw DER without PEM", data: edDER, wantErr: "no PEM block"},
		{name: "raw seed", data: []byte(base64.StdEncoding.EncodeToString(edKey.Private.Seed())), wantErr: "no PEM block"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := ParsePEM(tt.data)
			if err == nil {
				t.Fatalf("ParsePEM succeeded with kid %q, want an error", k.ID)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParsePEM error %q, want it to contain %q", err, tt.wantErr)
			}
			if k.Private != nil || k.ID != "" {
				t.Errorf("ParsePEM returned a key with its error")
			}
		})
	}
	// The control: the same DER under the right type parses.
	if _, err := ParsePEM(pemOf("PRIVATE KEY", edDER)); err != nil {
		t.Fatalf("control: ParsePEM of a valid Ed25519 PKCS #8 key: %v", err)
	}
}

func TestIssuerKey(t *testing.T) {
	k := mustGenerateKey(t)
	tests := []struct {
		name string
		ttl  time.Duration
	}{
		{name: "default ttl", ttl: 0},
		{name: "set ttl", ttl: time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NewIssuer("toolgate", tt.ttl, k).key
			if got.ID != k.ID || !got.Private.Equal(k.Private) {
				t.Errorf("signing key %q, want %q", got.ID, k.ID)
			}
		})
	}
}

// BenchmarkJWKS is the published set of two keys, written once at load.
func BenchmarkJWKS(b *testing.B) {
	k1, err := GenerateKey()
	if err != nil {
		b.Fatal(err)
	}
	k2, err := GenerateKey()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		JWKS(k1, k2)
	}
}
