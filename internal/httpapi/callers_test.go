package httpapi

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/apitest"
	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/manifest"
)

// startCallers serves the callers config of the module's tests: caller
// tokens from the platform's JWKS (issuer https://platform.test, audience
// toolgate, leeway 5s), and four tools, two behind policies.
func startCallers(t *testing.T, upstream, jwksURL string) *server {
	t.Helper()
	return startServer(t, callersOptions(t, upstream, jwksURL))
}

// callersOptions are startCallers' options.
func callersOptions(t *testing.T, upstream, jwksURL string) options {
	t.Helper()
	callers, _, err := NewAuthenticators(&TokenConfig{JWKSURL: jwksURL, Issuer: "https://platform.test", Audience: "toolgate", Leeway: 5 * time.Second}, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	tools := parseTools(t, `{"tools":[
{"name":"open","description":"Anyone.","input_schema":{"type":"object"},"target":{"type":"app","component":"api","method":"GET","path":"/md"}},
{"name":"admin_only","description":"Admins.","input_schema":{"type":"object"},"target":{"type":"app","component":"api","method":"GET","path":"/md"},
 "allow":"claims.role == 'admin'"},
{"name":"small","description":"Small amounts.","input_schema":{"type":"object","properties":{"amount":{"type":"number"}}},"target":{"type":"app","component":"api","method":"GET","path":"/md"},
 "allow":"input.amount < 100 && context.source == 'api'"},
{"name":"bookmark","description":"A JSON API mapped into channels.","input_schema":{"type":"object"},
 "target":{"type":"url","method":"GET","url":"`+upstream+`/api/bookmark","result":"{'content': body.title + ' ' + body.url, 'markdown': '[' + body.title + '](' + body.url + ')', 'embedUrl': body.url}"}}]}`)
	return options{
		sources:    []manifest.Source{{Name: "inline tools", Tools: tools}},
		components: map[string]*dispatch.Component{"api": component(t, "api", upstream, nil)},
		issuer:     "https://tools.test",
		// The bookmark's embed is on go.dev: a url target's embed is
		// shown only on embed_origins.
		embedOrigins: []string{"https://go.dev"},
		api:          Config{Callers: callers},
	}
}

func TestCallers(t *testing.T) {
	rec := apitest.NewRecorder(t)
	p := apitest.NewPlatform(t, "k1")
	s := startCallers(t, rec.URL, p.URL)

	user := p.Token(t, "k1", apitest.GoodClaims("u_7", "user"))
	admin := p.Token(t, "k1", apitest.GoodClaims("u_8", "admin"))

	// Refusals: every one a 401 with WWW-Authenticate, nothing sent.
	expired := apitest.GoodClaims("u_7", "user")
	expired["exp"] = time.Now().Add(-time.Minute).Unix()
	future := apitest.GoodClaims("u_7", "user")
	future["nbf"] = time.Now().Add(time.Minute).Unix()
	wrongIss := apitest.GoodClaims("u_7", "user")
	wrongIss["iss"] = "https://evil.test"
	wrongAud := apitest.GoodClaims("u_7", "user")
	wrongAud["aud"] = "other"
	noSub := apitest.GoodClaims("", "user")
	delete(noSub, "sub")
	pubDER, _ := x509.MarshalPKIXPublicKey(p.PublicKey("k1"))
	confused := jwt.NewWithClaims(jwt.SigningMethodHS256, apitest.GoodClaims("u_7", "admin"))
	confused.Header["kid"] = "k1"
	confusedTok, _ := confused.SignedString(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}))
	payload, _ := json.Marshal(apitest.GoodClaims("u_7", "admin"))
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT","kid":"k1"}`)) + "." + base64.RawURLEncoding.EncodeToString(payload) + "."

	before := rec.Count()
	for _, c := range []struct{ name, auth, code string }{
		{"no token", "", "unauthorized"},
		{"not bearer", "Basic dTpw", "unauthorized"},
		{"garbage", "Bearer abc.def.ghi", "invalid_token"},
		{"expired", "Bearer " + p.Token(t, "k1", expired), "invalid_token"},
		{"not yet valid", "Bearer " + p.Token(t, "k1", future), "invalid_token"},
		{"wrong issuer", "Bearer " + p.Token(t, "k1", wrongIss), "invalid_token"},
		{"wrong audience", "Bearer " + p.Token(t, "k1", wrongAud), "invalid_token"},
		{"no subject", "Bearer " + p.Token(t, "k1", noSub), "invalid_token"},
		{"alg none", "Bearer " + none, "invalid_token"},
		{"HS256 with the RSA public key", "Bearer " + confusedTok, "invalid_token"},
		{"unknown kid", "Bearer " + p.Token(t, "k-unknown", apitest.GoodClaims("u_7", "user")), "invalid_token"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, path := range []string{"/tools", "/tools/open"} {
				method := "GET"
				if path != "/tools" {
					method = "POST"
				}
				req, _ := http.NewRequest(method, s.URL+path, strings.NewReader(`{"input":{}}`))
				if c.auth != "" {
					req.Header.Set("Authorization", c.auth)
				}
				resp, err := s.client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				var e apiError
				_ = json.UnmarshalRead(resp.Body, &e)
				resp.Body.Close()
				if resp.StatusCode != 401 || e.Error.Code != c.code || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") {
					t.Errorf("%s %s: %d %+v %q", method, path, resp.StatusCode, e, resp.Header.Get("WWW-Authenticate"))
				}
			}
		})
	}
	if n := rec.Count() - before; n != 0 {
		t.Errorf("refused calls reached the upstream %d times", n)
	}

	// The JWKS needs no token.
	if resp, _ := s.Get(t, s.URL+"/.well-known/jwks.json"); resp.StatusCode != 200 {
		t.Errorf("jwks: %d", resp.StatusCode)
	}

	// The list is filtered by policy.
	names := func(tok string) []string {
		resp, body := s.Get(t, s.URL+"/tools", "Authorization", "Bearer "+tok)
		if resp.StatusCode != 200 {
			t.Fatalf("tools: %d %s", resp.StatusCode, body)
		}
		var list []struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal([]byte(body), &list)
		var out []string
		for _, l := range list {
			out = append(out, l.Name)
		}
		return out
	}
	if got := strings.Join(names(user), ","); got != "bookmark,open,small" {
		t.Errorf("user sees %s", got)
	}
	if got := strings.Join(names(admin), ","); got != "admin_only,bookmark,open,small" {
		t.Errorf("admin sees %s", got)
	}
	// In a model API's shape too, filtered the same way.
	for _, f := range []string{"openai", "anthropic"} {
		resp, body := s.Get(t, s.URL+"/tools?format="+f, "Authorization", "Bearer "+user)
		if resp.StatusCode != 200 || strings.Contains(body, "admin_only") || !strings.Contains(body, `"small"`) {
			t.Errorf("%s list for a user: %d %s", f, resp.StatusCode, body)
		}
	}

	// Allowed for one caller, forbidden for another; the identity is the
	// token's, never the envelope's.
	status, a := s.Invoke(t, "admin_only", `{"input":{}}`, "Authorization", "Bearer "+user)
	if status != 403 || a.Error == nil || a.Error.Code != "forbidden" {
		t.Errorf("user calling admin_only: %d %+v", status, a.Error)
	}
	status, a = s.Invoke(t, "admin_only", `{"input":{},"identity":{"user":"someone_else"}}`, "Authorization", "Bearer "+admin)
	if status != 200 || a.IsError {
		t.Fatalf("admin calling admin_only: %d %+v", status, a)
	}
	claims := s.VerifyWithJWKS(t, strings.TrimPrefix(rec.Get(t, "/md").Header.Get("Authorization"), "Bearer "))
	if claims["sub"] != "u_8" || claims["install"] != "in_9" {
		t.Errorf("the component was told %v, want the caller token's u_8/in_9", claims)
	}

	// A policy over the input.
	if status, _ := s.Invoke(t, "small", `{"input":{"amount":500}}`, "Authorization", "Bearer "+user); status != 403 {
		t.Errorf("amount 500: %d, want 403", status)
	}
	if status, a := s.Invoke(t, "small", `{"input":{"amount":50}}`, "Authorization", "Bearer "+user); status != 200 || a.IsError {
		t.Errorf("amount 50: %d %+v", status, a)
	}

	// A result mapping turns a JSON API's answer into channels.
	status, a = s.Invoke(t, "bookmark", `{"input":{}}`, "Authorization", "Bearer "+user)
	if status != 200 || a.IsError || a.Content != "Go https://go.dev" || a.Markdown != "[Go](https://go.dev)" || a.EmbedURL != "https://go.dev" || a.Card != "embed" {
		t.Errorf("mapped: %d %+v", status, a)
	}
}

// TestCallersFromAnywhere checks that with callers configured a verified
// caller need not be on loopback, without a network: the API is driven
// directly with a non-loopback peer address.
func TestCallersFromAnywhere(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "pong")
	}))
	defer up.Close()
	secret := strings.Repeat("s", 32)
	callers, _, err := NewAuthenticators(&TokenConfig{Secret: secret, Issuer: "https://runtime.test", Audience: "toolgate"}, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, options{
		sources: []manifest.Source{{Name: "inline tools", Tools: []manifest.Tool{{
			Name: "ping", Description: "d", InputSchema: jsontext.Value(`{"type":"object"}`),
			Target: dispatch.Spec{Type: "url", Method: "GET", URL: up.URL + "/ping"},
		}}}},
		ledger: "off",
		api:    Config{Callers: callers},
	})
	tok, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"iss": "https://runtime.test", "sub": "u", "aud": "toolgate", "exp": time.Now().Add(time.Minute).Unix()}).SignedString([]byte(secret))
	for _, c := range []struct {
		auth   string
		status int
	}{{"Bearer " + tok, 200}, {"", 401}} {
		req := httptest.NewRequest("POST", "/tools/ping", strings.NewReader(`{"input":{}}`))
		req.RemoteAddr = "198.51.100.7:4000"
		req.Header.Set("Content-Type", "application/json")
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		w := httptest.NewRecorder()
		s.api.ServeHTTP(w, req)
		if w.Code != c.status || (c.status == 200 && !strings.Contains(w.Body.String(), `"content":"pong"`)) {
			t.Errorf("auth %q: %d %s", c.auth, w.Code, w.Body)
		}
	}
}
