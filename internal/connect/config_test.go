package connect_test

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/connect"
)

func TestConfigCheck(t *testing.T) {
	flow := func(f func(c *connect.Config)) connect.Config {
		c := connect.Config{Name: "gmail", AuthorizeURL: "https://accounts.example/auth", TokenURL: "https://accounts.example/token", ClientID: "id", ClientSecret: "s", Scopes: []string{"mail.read"}}
		if f != nil {
			f(&c)
		}
		return c
	}
	tests := []struct {
		name string
		c    connect.Config
		want string // "" accepts
	}{
		{"flow", flow(nil), ""},
		{"loopback http", flow(func(c *connect.Config) { c.TokenURL = "http://127.0.0.1:9/token" }), ""},
		{"exchange", connect.Config{Name: "api", Exchange: "https://sts.example/token", Audience: "api://x"}, ""},
		{"bad name", flow(func(c *connect.Config) { c.Name = "g mail" }), "the name must match"},
		{"no endpoints", connect.Config{Name: "x", ClientID: "id"}, "give authorize_url and token_url"},
		{"no client", flow(func(c *connect.Config) { c.ClientID = "" }), "client_id is required"},
		{"http token url", flow(func(c *connect.Config) { c.TokenURL = "http://accounts.example/token" }), "must be an https URL"},
		{"http authorize url", flow(func(c *connect.Config) { c.AuthorizeURL = "http://10.0.0.1/auth" }), "authorize_url"},
		{"user info", flow(func(c *connect.Config) { c.TokenURL = "https://u:p@accounts.example/token" }), "user or password"},
		{"fragment", flow(func(c *connect.Config) { c.AuthorizeURL = "https://accounts.example/auth#x" }), "fragment"},
		{"redirect with query", flow(func(c *connect.Config) { c.RedirectURL = "https://tools.example/cb?x=1" }), "must not hold a query"},
		{"http redirect", flow(func(c *connect.Config) { c.RedirectURL = "http://tools.example/cb" }), "redirect_url"},
		{"scope with space", flow(func(c *connect.Config) { c.Scopes = []string{"a b"} }), "not one scope token"},
		{"param of the flow", flow(func(c *connect.Config) { c.Params = map[string]string{"Redirect_URI": "https://evil.example"} }), "the flow's own"},
		{"param state", flow(func(c *connect.Config) { c.Params = map[string]string{"state": "x"} }), "the flow's own"},
		{"client auth", flow(func(c *connect.Config) { c.ClientAuth = "jwt" }), "not basic or post"},
		{"exchange and flow", connect.Config{Name: "api", Exchange: "https://sts.example/token", TokenURL: "https://x.example/t"}, "without a person"},
		{"exchange over http", connect.Config{Name: "api", Exchange: "http://sts.example/token"}, "must be an https URL"},
		{"audience without exchange", flow(func(c *connect.Config) { c.Audience = "x" }), "audience is for exchange"},
		{"title with newline", flow(func(c *connect.Config) { c.Title = "Gmail\nEvil" }), "one line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.c.Check()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && err == nil:
				t.Fatalf("accepted, want an error with %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("error %q, want it to hold %q", err, tt.want)
			case err != nil && !strings.Contains(err.Error(), `connection "`):
				t.Fatalf("error %q does not name the connection", err)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	c := connect.Config{Name: "gmail", AuthorizeURL: "https://a.example/auth", TokenURL: "https://a.example/token", ClientID: "id"}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	if c.Title != "Gmail" || c.ClientAuth != connect.ClientAuthBasic {
		t.Fatalf("title %q, client auth %q; want Gmail, basic", c.Title, c.ClientAuth)
	}
}
