package caddymodule

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/golang-jwt/jwt/v5"
)

// platform is a caller's token issuer: RSA keys published as a JWKS.
type platform struct {
	srv  *httptest.Server
	mu   sync.Mutex
	keys map[string]*rsa.PrivateKey
}

func newPlatform(t *testing.T, kids ...string) *platform {
	p := &platform{keys: map[string]*rsa.PrivateKey{}}
	for _, kid := range kids {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		p.keys[kid] = k
	}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *platform) token(t *testing.T, kid string, claims jwt.MapClaims) string {
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

func goodClaims(user, role string) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{
		"iss": "https://platform.test", "aud": "toolgate", "sub": user, "install": "in_9", "role": role,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Minute).Unix(),
	}
}

func callersConfig(t *testing.T, upstream, jwksURL string) string {
	dir := dataDir(t)
	return testGlobals(dir) + fmt.Sprintf(`http://127.0.0.1:9080 {
	bind 127.0.0.1
	handle_path /toolgate/* {
		toolgate {
			component api %[1]s
			ledger bolt %[3]s/ledger.db
			identity {
				issuer https://tools.test
			}
			callers {
				jwks_url %[2]s
				issuer https://platform.test
				audience toolgate
				leeway 5s
			}
			tool open {
				description "Anyone."
				input_schema `+"`"+`{"type":"object"}`+"`"+`
				target app api GET /md
			}
			tool admin_only {
				description "Admins."
				input_schema `+"`"+`{"type":"object"}`+"`"+`
				target app api GET /md
				allow "claims.role == 'admin'"
			}
			tool small {
				description "Small amounts."
				input_schema `+"`"+`{"type":"object","properties":{"amount":{"type":"number"}}}`+"`"+`
				target app api GET /md
				allow "input.amount < 100 && context.source == 'api'"
			}
			tool bookmark {
				description "A JSON API mapped into channels."
				input_schema `+"`"+`{"type":"object"}`+"`"+`
				target url GET %[1]s/api/bookmark
				result "{'content': body.title + ' ' + body.url, 'markdown': '[' + body.title + '](' + body.url + ')', 'embedUrl': body.url}"
			}
		}
	}
}
`, upstream, jwksURL, dir)
}

func get(t *testing.T, tc *caddytest.Tester, url string, header ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := tc.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestIdentityKeyRotation moves the signing role to a new key while the old
// one is still published, then retires the old one.
func TestIdentityKeyRotation(t *testing.T) {
	rec := newRecorder(t)
	k1, k2, k3 := writeKey(t), writeKey(t), writeKey(t)
	cfg := func(keys, signing string) string {
		return testGlobals(dataDir(t)) + fmt.Sprintf(`http://127.0.0.1:9080 {
	bind 127.0.0.1
	handle_path /toolgate/* {
		toolgate {
			component api %[1]s
			ledger off
			identity {
				issuer https://tools.test
				%[2]s
				signing_key %[3]s
			}
			tool md {
				description "Markdown."
				input_schema `+"`"+`{"type":"object"}`+"`"+`
				target app api GET /md
			}
		}
	}
}`, rec.srv.URL, keys, signing)
	}
	tc := caddytest.NewTester(t)
	for _, step := range []struct {
		keys, signing string
		published     []string
	}{
		{"key k1 " + k1, "k1", []string{"k1"}},
		{"key k1 " + k1 + "\nkey k2 " + k2, "k2", []string{"k1", "k2"}},
		{"key k2 " + k2 + "\nkey k3 " + k3, "k3", []string{"k2", "k3"}},
	} {
		tc.InitServer(cfg(step.keys, step.signing), "caddyfile")
		keys := jwksKeys(t, tc)
		if len(keys) != len(step.published) {
			t.Errorf("signing %s: JWKS has %d keys, want %v", step.signing, len(keys), step.published)
		}
		for _, kid := range step.published {
			if _, ok := keys[kid]; !ok {
				t.Errorf("signing %s: JWKS lacks %s", step.signing, kid)
			}
		}
		if status, a := invoke(t, tc, "md", `{"input":{},`+who+`}`); status != 200 || a.IsError {
			t.Fatalf("signing %s: %d %+v", step.signing, status, a)
		}
		tok := strings.TrimPrefix(rec.get(t, "/md").Header.Get("Authorization"), "Bearer ")
		parsed, _, err := jwt.NewParser().ParseUnverified(tok, jwt.MapClaims{})
		if err != nil || parsed.Header["kid"] != step.signing {
			t.Errorf("token kid %v, want %s (%v)", parsed.Header["kid"], step.signing, err)
		}
		verifyWithJWKS(t, tc, tok)
	}
}
