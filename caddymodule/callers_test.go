package caddymodule

import (
	"fmt"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/golang-jwt/jwt/v5"

	"github.com/toolgate/toolgate/internal/apitest"
)

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

// TestIdentityKeyRotation moves the signing role to a new key while the old
// one is still published, then retires the old one.
func TestIdentityKeyRotation(t *testing.T) {
	rec := apitest.NewRecorder(t)
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
}`, rec.URL, keys, signing)
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
		initServer(tc, cfg(step.keys, step.signing))
		keys := client(tc).JWKSKeys(t)
		if len(keys) != len(step.published) {
			t.Errorf("signing %s: JWKS has %d keys, want %v", step.signing, len(keys), step.published)
		}
		for _, kid := range step.published {
			if _, ok := keys[kid]; !ok {
				t.Errorf("signing %s: JWKS lacks %s", step.signing, kid)
			}
		}
		if status, a := client(tc).Invoke(t, "md", `{"input":{},`+apitest.Who+`}`); status != 200 || a.IsError {
			t.Fatalf("signing %s: %d %+v", step.signing, status, a)
		}
		tok := strings.TrimPrefix(rec.Get(t, "/md").Header.Get("Authorization"), "Bearer ")
		parsed, _, err := jwt.NewParser().ParseUnverified(tok, jwt.MapClaims{})
		if err != nil || parsed.Header["kid"] != step.signing {
			t.Errorf("token kid %v, want %s (%v)", parsed.Header["kid"], step.signing, err)
		}
		client(tc).VerifyWithJWKS(t, tok)
	}
}
