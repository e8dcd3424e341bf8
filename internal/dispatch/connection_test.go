package dispatch_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/dispatch"
)

// TestConnectionRefs: a user's token goes only in a url target's header or
// query value, of a declared connection; everywhere else the target is
// refused when it compiles.
func TestConnectionRefs(t *testing.T) {
	env := dispatch.Env{Components: testComponents(t), Connections: map[string]bool{"gmail": true, "cal": true}}
	tests := []struct {
		name    string
		spec    dispatch.Spec
		conns   []string
		wantErr string
	}{
		{name: "url header", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://mail.example/m", Headers: map[string]string{"Authorization": "Bearer ${connection.gmail}"}}, conns: []string{"gmail"}},
		{name: "url query", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://mail.example/m", Query: map[string]string{"access_token": "${connection.gmail}"}}, conns: []string{"gmail"}},
		{name: "two, sorted, once each", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://x.example/", Headers: map[string]string{"A": "${connection.gmail}", "B": "${connection.cal}", "C": "${connection.gmail}"}}, conns: []string{"cal", "gmail"}},
		{name: "none", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://x.example/"}},
		{name: "undeclared", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://x.example/", Headers: map[string]string{"A": "${connection.drive}"}}, wantErr: `connection "drive" is not declared`},
		{name: "url path", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://x.example/t/${connection.gmail}"}, wantErr: "never in its URL or body"},
		{name: "url query in the URL", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://x.example/t?k=${connection.gmail}"}, wantErr: "never in its URL or body"},
		{name: "url body", spec: dispatch.Spec{Type: "url", Method: "POST", URL: "https://x.example/t", Body: jsontext.Value(`{"t":"${connection.gmail}"}`)}, wantErr: "never in its URL or body"},
		{name: "app header", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x", Headers: map[string]string{"X-Token": "${connection.gmail}"}}, wantErr: "a component gets the identity token"},
		{name: "app query", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x", Query: map[string]string{"t": "${connection.gmail}"}}, wantErr: "a component gets the identity token"},
		{name: "app path", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x/${connection.gmail}"}, wantErr: "never in its URL or body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tgt, err := dispatch.Compile(tt.spec, env)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Compile = %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(tgt.Connections(), tt.conns) {
				t.Errorf("Connections = %q, want %q", tgt.Connections(), tt.conns)
			}
			if tgt.NeedsUser() != (len(tt.conns) > 0) {
				t.Errorf("NeedsUser = %v with connections %q", tgt.NeedsUser(), tt.conns)
			}
		})
	}
}

// TestConnectionRequest: the token is set where the author wrote it, and
// a value that would break the header is refused without being named.
func TestConnectionRequest(t *testing.T) {
	env := dispatch.Env{Connections: map[string]bool{"gmail": true}}
	tgt, err := dispatch.Compile(dispatch.Spec{Type: "url", Method: "GET", URL: "https://mail.example/m",
		Headers: map[string]string{"Authorization": "Bearer ${connection.gmail}"}, Query: map[string]string{"q": "${input.q}"}}, env)
	if err != nil {
		t.Fatal(err)
	}
	req, err := tgt.Request(context.Background(), map[string]any{"q": "${connection.gmail}"}, map[string]string{"gmail": "at_1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := req.Header.Get("Authorization"); got != "Bearer at_1" {
		t.Errorf("Authorization = %q", got)
	}
	// An input that spells a reference is text, never resolved again.
	if got := req.URL.Query().Get("q"); got != "${connection.gmail}" {
		t.Errorf("q = %q: an input was read as a reference", got)
	}
	if _, err := tgt.Request(context.Background(), map[string]any{"q": "x"}, map[string]string{"gmail": "at\r\nX-Evil: 1"}); err == nil || strings.Contains(err.Error(), "at") && strings.Contains(err.Error(), "Evil") {
		t.Errorf("a token with CR LF: %v", err)
	}
	if _, err := tgt.Request(context.Background(), map[string]any{"q": "x"}, nil); err == nil || !strings.Contains(err.Error(), "${connection.gmail}") {
		t.Errorf("no token at hand: %v", err)
	}
}

// TestButtonNoConnection: a card's button (written by a component at run
// time) never sends a user's token.
func TestButtonNoConnection(t *testing.T) {
	owner := testComponents(t)["api"]
	_, err := dispatch.CompileButton(jsontext.Value(`{"type":"app","component":"api","method":"GET","path":"/x","headers":{"X-T":"${connection.gmail}"}}`), owner)
	if err == nil {
		t.Fatal("a button with ${connection.gmail} compiled")
	}
}

// TestMCPServerConnection: an mcp target sends its server's connection,
// and so do the buttons of the cards it answers; both need a user.
func TestMCPServerConnection(t *testing.T) {
	env := dispatch.Env{Servers: map[string]dispatch.MCPServer{"drive": fakeServer{name: "drive", connection: "gmail"}}}
	tgt, err := dispatch.Compile(dispatch.Spec{Type: "mcp", Server: "drive", Tool: "list"}, env)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(tgt.Connections(), []string{"gmail"}) || !tgt.NeedsUser() {
		t.Fatalf("Connections = %q, NeedsUser = %v", tgt.Connections(), tgt.NeedsUser())
	}
	btn, err := dispatch.CompileCardButton(jsontext.Value(`{"type":"mcp","server":"drive","tool":"list","continue":true}`), tgt)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(btn.Connections(), []string{"gmail"}) {
		t.Errorf("the button's Connections = %q", btn.Connections())
	}
}
