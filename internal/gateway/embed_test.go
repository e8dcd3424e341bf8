package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/outbound"
)

// TestURLTargetEmbeds: a url target is someone else's endpoint, and the
// card frames its embedUrl on the app's page: only an embed on one of
// embed_origins is shown; any other is an error result that names its
// origin. An app target's embeds are its component's, as before.
func TestURLTargetEmbeds(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"content":"see card","embedUrl":%q}`, r.URL.Query().Get("embed"))
	}))
	t.Cleanup(up.Close)
	comp, err := dispatch.NewComponent("api", up.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	schema := []byte(`{"type":"object","properties":{"embed":{"type":"string"}},"required":["embed"]}`)
	tools := []manifest.Tool{
		{Name: "ext", Description: "d", InputSchema: schema,
			Target: dispatch.Spec{Type: "url", Method: "GET", URL: up.URL + "/e", Query: map[string]string{"embed": "${input.embed}"}}},
		{Name: "own", Description: "d", InputSchema: schema,
			Target: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/e", Query: map[string]string{"embed": "${input.embed}"}}},
		{Name: "mapped", Description: "d", InputSchema: schema,
			Target: dispatch.Spec{Type: "url", Method: "GET", URL: up.URL + "/e", Query: map[string]string{"embed": "${input.embed}"},
				Result: `{"content": body.content, "embedUrl": body.embedUrl}`}},
	}
	set, err := manifest.Compile([]manifest.Source{{Name: "test", Tools: tools}}, map[string]*dispatch.Component{"api": comp})
	if err != nil {
		t.Fatal(err)
	}
	key, _ := identity.GenerateKey()
	gw := New(Config{Tools: set, Issuer: identity.NewIssuer("gw", time.Minute, key), Client: outbound.NewClient(time.Second, 1<<20),
		EmbedOrigins: []string{"https://cards.example", "http://127.0.0.1:8080"}})
	me := Identity{User: "u_1", Install: "in_1"}

	for _, c := range []struct {
		tool, embed string
		refused     string // the origin the error names; "" when shown
	}{
		{"ext", "https://cards.example/c/1", ""},
		{"ext", "http://127.0.0.1:8080/app/card", ""},
		{"ext", "https://CARDS.example/c/1", ""},
		{"ext", "https://evil.example/phish", "https://evil.example"},
		{"ext", "https://cards.example.evil.example/c", "https://cards.example.evil.example"},
		{"ext", "http://cards.example/c/1", "http://cards.example"},
		{"ext", "https://cards.example:8443/c", "https://cards.example:8443"},
		{"ext", "http://127.0.0.1:9/app", "http://127.0.0.1:9"},
		{"mapped", "https://evil.example/x", "https://evil.example"},
		{"mapped", "https://cards.example/x", ""},
		{"own", "https://anywhere.example/its/own", ""},
	} {
		t.Run(c.tool+" "+c.embed, func(t *testing.T) {
			a, err := gw.Invoke(context.Background(), Call{Tool: c.tool, Input: jsontext.Value(fmt.Sprintf(`{"embed":%q}`, c.embed)), Identity: me})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case c.refused == "" && (a.IsError || a.EmbedURL != c.embed || a.Result.Card != "embed"):
				t.Errorf("%+v, want the embed shown", a.Result)
			case c.refused != "" && (!a.IsError || a.EmbedURL != "" || a.Result.Card != "" ||
				!strings.Contains(a.Content, "embedUrl on "+c.refused+", which is not one of embed_origins")):
				t.Errorf("%+v, want an error result naming %s and embed_origins", a.Result, c.refused)
			}
		})
	}
}
