package caddymodule

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/go-json-experiment/json"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/apitest"
	"github.com/toolgate/toolgate/internal/connect"
	"github.com/toolgate/toolgate/internal/connect/oauthtest"
	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// gmailBlock is a connection block with every option of the
// authorization flow.
var gmailBlock = []string{
	"connection gmail {",
	"title Gmail",
	"authorize_url https://accounts.example.com/authorize",
	"token_url https://accounts.example.com/token",
	"client_id {env.GMAIL_CLIENT_ID}",
	"client_secret {env.GMAIL_CLIENT_SECRET}",
	"client_auth post",
	"scopes mail.read mail.send",
	"scopes profile",
	"redirect_url https://tools.example.com/toolgate/connections/gmail/callback",
	"param access_type offline",
	"param prompt consent",
	"}",
}

// mailTool is a url tool whose header line is header.
func mailTool(header string) []string {
	return []string{"tool mail {", "description d", "input_schema `{\"type\":\"object\"}`",
		"target url GET https://mail.example.com/messages", header, "}"}
}

// TestConnectionsCaddyfile: the connection blocks, connection_keys and an
// mcp_server's connection adapt to their JSON fields, placeholders kept
// for the load to resolve.
func TestConnectionsCaddyfile(t *testing.T) {
	for _, c := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"every option of the flow", gmailBlock,
			`{"connections":{"gmail":{"title":"Gmail","authorize_url":"https://accounts.example.com/authorize","token_url":"https://accounts.example.com/token",` +
				`"client_id":"{env.GMAIL_CLIENT_ID}","client_secret":"{env.GMAIL_CLIENT_SECRET}","client_auth":"post","scopes":["mail.read","mail.send","profile"],` +
				`"redirect_url":"https://tools.example.com/toolgate/connections/gmail/callback","params":{"access_type":"offline","prompt":"consent"}}}}`},
		{"a token exchange", []string{"connection api {", "exchange https://sts.example.com/token", "audience api://x", "client_id {env.STS_ID}", "}"},
			`{"connections":{"api":{"client_id":"{env.STS_ID}","exchange":"https://sts.example.com/token","audience":"api://x"}}}`},
		{"connection_keys", []string{"connection api {", "exchange https://sts.example.com/token", "}", "connection_keys /etc/k/new.key {env.OLD_KEY}", "connection_keys /etc/k/older.key"},
			`{"connections":{"api":{"exchange":"https://sts.example.com/token"}},"connection_keys":["/etc/k/new.key","{env.OLD_KEY}","/etc/k/older.key"]}`},
		{"an mcp server's connection", append(withLines(gmailBlock[:1], "authorize_url https://a.example/authorize", "token_url https://a.example/token", "client_id c", "}"),
			"mcp_server drive https://drive.example.com/mcp {", "connection gmail", "}"),
			`{"mcp_servers":{"drive":{"url":"https://drive.example.com/mcp","connection":"gmail"}},"connections":{"gmail":{"authorize_url":"https://a.example/authorize","token_url":"https://a.example/token","client_id":"c"}}}`},
		{"a url tool's header and query", append(withLines(gmailBlock), "tool mail {", "description d", "input_schema `{\"type\":\"object\"}`",
			"target url GET https://mail.example.com/messages", `header Authorization "Bearer ${connection.gmail}"`, "query key ${connection.gmail}", "}"),
			`"target":{"type":"url","method":"GET","url":"https://mail.example.com/messages","query":{"key":"${connection.gmail}"},"headers":{"Authorization":"Bearer ${connection.gmail}"}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, err := parseToolgate(c.lines...)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(h, jsonread.Legacy)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(got), c.want) {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

// withLines is a copy of lines with more appended: the cases must not share
// gmailBlock's backing array.
func withLines(lines []string, more ...string) []string {
	return append(append([]string(nil), lines...), more...)
}

// TestConnectionsCaddyfileErrors: where a token may not go, and what a
// connection block may not hold, are refused when the Caddyfile is
// adapted, naming the file, the line and the tool.
func TestConnectionsCaddyfileErrors(t *testing.T) {
	tool := func(target string, more ...string) []string {
		return withLines(gmailBlock, withLines([]string{"tool t {", "description d", "input_schema `{\"type\":\"object\"}`", target}, append(more, "}")...)...)
	}
	const toolLine = "Testfile:15" // the tool's line after gmailBlock
	for _, c := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"undeclared connection", tool("target url GET https://mail.example.com/", `header Authorization "Bearer ${connection.nope}"`),
			toolLine + `: tool "t": target: url target: ${connection.nope}: connection "nope" is not declared`},
		{"no connection at all", mailTool(`header Authorization "Bearer ${connection.gmail}"`),
			`Testfile:2: tool "mail": target: url target: ${connection.gmail}: connection "gmail" is not declared`},
		{"in an app target", append([]string{api}, tool("target app api GET /mail", `header Authorization "Bearer ${connection.gmail}"`)...),
			`Testfile:16: tool "t": target: app target: header "Authorization" belongs to the gateway`},
		{"in an app target's other header", append([]string{api}, tool("target app api GET /mail", `header X-Token ${connection.gmail}`)...),
			`Testfile:16: tool "t": target: app target: ${connection.gmail}: a connection's token goes only to a url target; a component gets the identity token`},
		{"in a url's path", tool("target url GET https://mail.example.com/${connection.gmail}/messages"),
			toolLine + `: tool "t": target: url target: ${connection.gmail}: a connection's token goes in a header or a query value of a url target, never in its URL or body`},
		{"in a url's query string", tool("target url GET https://mail.example.com/messages?t=${connection.gmail}"),
			toolLine + `: tool "t": target: url target: ${connection.gmail}: a connection's token goes in a header or a query value of a url target, never in its URL or body`},
		{"in a url's body", tool("target url POST https://mail.example.com/messages", `body "{\"t\":\"${connection.gmail}\"}"`),
			toolLine + `: tool "t": target: url target: ${connection.gmail}: a connection's token goes in a header or a query value of a url target, never in its URL or body`},
		{"as a url's whole body", tool("target url POST https://mail.example.com/messages", `body ${connection.gmail}`),
			toolLine + `: tool "t": target: url target: ${connection.gmail}: a connection's token goes in a header or a query value of a url target, never in its URL or body`},
		{"unknown option", []string{"connection gmail {", "authorize https://a.example/authorize", "}"},
			"unrecognized connection subdirective authorize, at Testfile:3"},
		{"connection twice", []string{"connection gmail {", "}", "connection gmail {", "}"}, "connection gmail already specified, at Testfile:4"},
		{"connection without name", []string{"connection {", "}"}, "wrong argument count or unexpected line ending after 'connection', at Testfile:2"},
		{"connection with an argument", []string{"connection gmail https://a.example {", "}"}, "wrong argument count or unexpected line ending after 'https://a.example', at Testfile:2"},
		{"param without value", []string{"connection gmail {", "param prompt", "}"}, "wrong argument count or unexpected line ending after 'prompt', at Testfile:3"},
		{"param twice", []string{"connection gmail {", "param prompt a", "param prompt b", "}"}, "param prompt already specified, at Testfile:4"},
		{"scopes without scope", []string{"connection gmail {", "scopes", "}"}, "wrong argument count or unexpected line ending after 'scopes', at Testfile:3"},
		{"connection_keys without file", []string{"connection_keys"}, "wrong argument count or unexpected line ending after 'connection_keys', at Testfile:2"},
		{"mcp server connection without name", []string{"mcp_server a https://a.example {", "connection", "}"}, "wrong argument count or unexpected line ending after 'connection', at Testfile:3"},
		{"mcp server naming an undeclared one", withLines(gmailBlock, "mcp_server drive https://drive.example.com/mcp {", "connection gdrive", "}"),
			`mcp server "drive": connection "gdrive" is not declared, at Testfile:18`},
		{"named like a component", []string{api, "connection api {", "exchange https://sts.example.com/token", "}"},
			`connection "api": a component or mcp server has the same name; identity tokens name their audience by it, at Testfile:6`},
		{"named like an mcp server", []string{"mcp_server crm https://crm.example.com/mcp", "connection crm {", "exchange https://sts.example.com/token", "}"},
			`connection "crm": a component or mcp server has the same name; identity tokens name their audience by it, at Testfile:6`},
		{"keys and no connection", []string{"connection_keys /etc/k/conn"}, "connection_keys: no connection is declared, at Testfile:3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseToolgate(c.lines...)
			if err == nil || err.Error() != c.want {
				t.Errorf("got  %v\nwant %s", err, c.want)
			}
		})
	}
}

// TestConnectionsLoadErrors: what only the load can check, with the
// placeholders resolved, is refused then, naming the connection (and the
// option or the server); and what adapting refuses, through Caddy's load.
func TestConnectionsLoadErrors(t *testing.T) {
	flow := func(name string, more ...string) string {
		return strings.Join(append([]string{"connection " + name + " {",
			"authorize_url https://accounts.example.com/authorize",
			"token_url https://accounts.example.com/token",
			"client_id gw"}, append(more, "}")...), "\n")
	}
	for _, c := range []struct{ name, inner, want string }{
		{"named like a component", flow("api"), `connection "api": a component or mcp server has the same name`},
		{"named like an mcp server", flow("crm") + "\nmcp_server crm http://127.0.0.1:1/mcp", `connection "crm": a component or mcp server has the same name`},
		{"keys and no connection", "connection_keys /nonexistent/conn-key", "connection_keys: no connection is declared"},
		{"an mcp server naming an undeclared one", flow("gmail") + "\nmcp_server drive http://127.0.0.1:1/mcp {\nconnection gdrive\n}", `mcp server "drive": connection "gdrive" is not declared`},
		{"token_url in the clear", strings.Replace(flow("gmail"), "https://accounts.example.com/token", "http://accounts.example.com/token", 1), `connection "gmail": token_url:`},
		{"authorize_url in the clear", strings.Replace(flow("gmail"), "https://accounts.example.com/authorize", "http://accounts.example.com/authorize", 1), `connection "gmail": authorize_url:`},
		{"exchange in the clear", "connection sts {\nexchange http://sts.example.com/token\n}", `connection "sts": exchange:`},
		{"client_secret from an unset variable", flow("gmail", "client_secret {env.TG_TEST_UNSET_SECRET}"), `connection "gmail": client_secret: `},
		{"a bad name", flow("g.mail"), `connection "g.mail": the name must match`},
		{"a missing key file", flow("gmail") + "\nconnection_keys /nonexistent/conn-key", "connection_keys: open /nonexistent/conn-key: no such file"},
		{"a flow param of its own", flow("gmail", "param state x"), `connection "gmail": param "state" is the flow's own`},
	} {
		t.Run(c.name, func(t *testing.T) {
			caddytest.AssertLoadError(t, loadErrorConfig(t, c.inner), "caddyfile", strings.ReplaceAll(c.want, `"`, `\"`))
		})
	}
}

// connectedConfig is a gateway under /toolgate with the connection gmail
// at the test OAuth server, its client secret read from
// TG_TEST_GMAIL_SECRET at load, and mail, a url tool that sends the
// user's gmail token to resource; extra lines go in the toolgate block.
func connectedConfig(dir string, oauth *oauthtest.Server, resource string, extra ...string) string {
	return testGlobals(dir) + fmt.Sprintf(`http://127.0.0.1:9080 {
	bind 127.0.0.1
	handle_path /toolgate/* {
		toolgate {
			ledger bolt %[1]s/ledger.db
			connection gmail {
				authorize_url %[2]s
				token_url %[3]s
				client_id gw
				client_secret {env.TG_TEST_GMAIL_SECRET}
				scopes mail.read
			}
			tool mail {
				description "The user's mail."
				input_schema `+emptySchema+`
				target url GET %[4]s/mail
				header Authorization "Bearer ${connection.gmail}"
				result `+"`{'content': 'mail of ' + body.subject, 'isError': status != 200}`"+`
			}
			%[5]s
		}
	}
}`, dir, oauth.AuthorizeURL(), oauth.TokenURL(), resource, strings.Join(extra, "\n\t\t\t"))
}

// connRig is a test Caddy in front of a test OAuth server, whose resource
// endpoint the tools call.
type connRig struct {
	tc    *caddytest.Tester
	oauth *oauthtest.Server
	// resource is the URL of oauth's ResourceHandler.
	resource string
	// callback is where the service last sent the browser back to.
	callback *url.URL
}

func newConnRig(t *testing.T) *connRig {
	t.Helper()
	t.Setenv("TG_TEST_GMAIL_SECRET", "gw-secret")
	r := &connRig{oauth: oauthtest.New(t, oauthtest.Options{ClientID: "gw", ClientSecret: "gw-secret"})}
	res := httptest.NewServer(r.oauth.ResourceHandler())
	t.Cleanup(res.Close)
	r.resource = res.URL
	r.tc = caddytest.NewTester(t)
	return r
}

// connAnswer is an invoke's or a status's answer, with its connect card.
type connAnswer struct {
	CallID  string `json:"callId"`
	Status  string `json:"status"`
	IsError bool   `json:"isError"`
	Content string `json:"content"`
	Card    struct {
		Connection struct {
			Name string `json:"name"`
		} `json:"connection"`
		Elements []struct {
			ID  string `json:"id"`
			URL string `json:"url"`
		} `json:"elements"`
	} `json:"card"`
}

// call invokes tool as u_1 at in_1 in a thread, with input if given
// (else {}).
func (r *connRig) call(t *testing.T, tool, callID string, input ...string) connAnswer {
	t.Helper()
	in := "{}"
	if len(input) > 0 {
		in = input[0]
	}
	status, body := client(r.tc).Send(t, "POST", base+"/tools/"+tool, "application/json",
		`{"input":`+in+`,"callId":"`+callID+`",`+apitest.ThreadCtx+`,`+apitest.Who+`}`)
	if status != 200 {
		t.Fatalf("%s: %d %s", tool, status, body)
	}
	return decodeConn(t, body)
}

// status is GET /calls/{callID} as u_1 at in_1.
func (r *connRig) status(t *testing.T, callID string) connAnswer {
	t.Helper()
	status, body := client(r.tc).Send(t, "GET", base+"/calls/"+callID+"?user=u_1&install=in_1", "", "")
	if status != 200 {
		t.Fatalf("GET /calls/%s: %d %s", callID, status, body)
	}
	return decodeConn(t, body)
}

func decodeConn(t *testing.T, body string) connAnswer {
	t.Helper()
	var a connAnswer
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return a
}

// connectURL is the authorization URL of a's connect card for gmail.
func connectURL(t *testing.T, a connAnswer) string {
	t.Helper()
	if a.Status != "action_required" || a.Card.Connection.Name != "gmail" || len(a.Card.Elements) != 1 ||
		a.Card.Elements[0].ID != "connect" || a.Card.Elements[0].URL == "" {
		t.Fatalf("want gmail's connect card, got %+v", a)
	}
	return a.Card.Elements[0].URL
}

// connect answers the connect card of the waiting call callID: the
// service's authorization page sends the browser to the gateway's
// callback, through Caddy, which runs the call; it returns the call's
// answer then.
func (r *connRig) connect(t *testing.T, a connAnswer) connAnswer {
	t.Helper()
	auth, err := url.Parse(connectURL(t, a))
	if err != nil {
		t.Fatal(err)
	}
	// Derived from the request that answered the card: its Host and the
	// path the directive is mounted on (handle_path strips it).
	if got, want := auth.Query().Get("redirect_uri"), base+"/connections/gmail/callback"; got != want {
		t.Errorf("redirect_uri %q, want %q", got, want)
	}
	cb := r.oauth.Authorize(t, auth.String())
	if !strings.HasPrefix(cb.String(), base+"/connections/gmail/callback?") {
		t.Fatalf("the service sends the browser to %s", cb)
	}
	r.callback = cb
	resp, page := client(r.tc).Get(t, cb.String())
	if resp.StatusCode != 200 || !strings.Contains(page, "Gmail is connected") {
		t.Fatalf("callback: %d %s", resp.StatusCode, page)
	}
	// Its URL holds the code and the state: Caddy passes on the headers
	// that keep it from other sites and caches.
	if h := resp.Header; h.Get("Referrer-Policy") != "no-referrer" || h.Get("Cache-Control") != "no-store" {
		t.Errorf("callback headers %v", h)
	}
	return r.status(t, a.CallID)
}

// hits counts the resource's requests, checking each carried alice's
// token.
func (r *connRig) hits(t *testing.T) int {
	t.Helper()
	hits := r.oauth.ResourceHits()
	for _, h := range hits {
		if h.Subject != "alice@example.com" {
			t.Errorf("the resource got %+v, not alice's token", h)
		}
	}
	return len(hits)
}

// TestDirectiveConnection: through the directive, a call of a tool that
// needs the user's gmail answers the connect card and sends nothing; the
// card's link, the service and the callback through Caddy run it once
// with the user's token. The key that seals tokens is generated in
// Caddy's storage, and a reload keeps the user connected.
func TestDirectiveConnection(t *testing.T) {
	r := newConnRig(t)
	dir := dataDir(t)
	cfg := connectedConfig(dir, r.oauth, r.resource)
	initServer(r.tc, cfg)

	a := r.call(t, "mail", "m1")
	if n := r.hits(t); n != 0 {
		t.Fatalf("the resource was called %d times before the user connected", n)
	}
	done := r.connect(t, a)
	if done.Status != "done" || done.IsError || !strings.Contains(done.Content, "alice@example.com") {
		t.Fatalf("the call after connecting: %+v", done)
	}
	if n := r.hits(t); n != 1 {
		t.Fatalf("%d resource hits, want 1", n)
	}
	// The state is spent: the same callback again runs nothing.
	if status, page := client(r.tc).Send(t, "GET", r.callback.String(), "", ""); status != 400 || !strings.Contains(page, "no longer works") {
		t.Errorf("the callback again: %d %s", status, page)
	}
	if n := r.hits(t); n != 1 || r.oauth.Count("token", "") != 1 {
		t.Fatalf("a spent state reached the resource (%d hits) or the token endpoint", n)
	}
	// The secret came from the environment, in HTTP Basic.
	for _, req := range r.oauth.Requests() {
		if req.Endpoint == "token" && req.Authorization != "Basic "+base64.StdEncoding.EncodeToString([]byte("gw:gw-secret")) {
			t.Errorf("the token endpoint got Authorization %q", req.Authorization)
		}
	}

	keyFile := filepath.Join(dir, "toolgate", "connections", "aes-256.key")
	stored, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatalf("no key in Caddy's storage: %v", err)
	}
	if fi, err := os.Stat(keyFile); err != nil {
		t.Fatal(err)
	} else if fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("the stored key's mode is %v: others may read it", fi.Mode())
	}
	if _, err := connect.ParseKey(stored); err != nil {
		t.Fatalf("the stored key: %v", err)
	}

	// Another config (so that Caddy loads it), on the same storage.
	initServer(r.tc, strings.Replace(cfg, "The user's mail.", "The user's mail, reloaded.", 1))
	if a := r.call(t, "mail", "m2"); a.Status != "done" || a.IsError {
		t.Fatalf("after a reload: %+v", a)
	}
	if n := r.hits(t); n != 2 {
		t.Fatalf("%d resource hits, want 2", n)
	}
	if again, _ := os.ReadFile(keyFile); string(again) != string(stored) {
		t.Error("the reload made another key")
	}
	if n := r.oauth.Count("token", ""); n != 1 {
		t.Errorf("%d token requests, want the one code exchange", n)
	}
}

// TestDirectiveConnectionKeys: with connection_keys, the first key seals
// and every key listed opens; a config that drops the key a token was
// sealed with makes its user connect again. No key is generated in
// Caddy's storage.
func TestDirectiveConnectionKeys(t *testing.T) {
	r := newConnRig(t)
	dir := dataDir(t)
	keys := t.TempDir()
	// Not *.key: caddytest rewrites such paths into its own folder.
	k1, k2 := filepath.Join(keys, "conn-1"), filepath.Join(keys, "conn-2")
	for _, f := range []string{k1, k2} {
		if err := os.WriteFile(f, connect.GenerateKey(), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	load := func(files ...string) {
		t.Helper()
		initServer(r.tc, connectedConfig(dir, r.oauth, r.resource, "connection_keys "+strings.Join(files, " ")))
	}

	load(k1)
	if done := r.connect(t, r.call(t, "mail", "k1")); done.Status != "done" || done.IsError {
		t.Fatalf("the call after connecting: %+v", done)
	}
	if _, err := os.Stat(filepath.Join(dir, "toolgate", "connections", "aes-256.key")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a key was generated in storage beside connection_keys: %v", err)
	}

	// A new key first, the old one still listed: still connected.
	load(k2, k1)
	if a := r.call(t, "mail", "k2"); a.Status != "done" || a.IsError {
		t.Fatalf("with the old key second: %+v", a)
	}
	if n := r.hits(t); n != 2 {
		t.Fatalf("%d resource hits, want 2", n)
	}

	// The old key dropped: the token does not open, and the user
	// connects again; nothing is sent meanwhile.
	load(k2)
	a := r.call(t, "mail", "k3")
	if n := r.hits(t); n != 2 {
		t.Fatalf("%d resource hits with the old key dropped, want 2", n)
	}
	if done := r.connect(t, a); done.Status != "done" || done.IsError {
		t.Fatalf("connecting again: %+v", done)
	}
	if n := r.hits(t); n != 3 || r.oauth.Count("token", "authorization_code") != 2 {
		t.Fatalf("%d resource hits and %d codes, want 3 and 2", n, r.oauth.Count("token", "authorization_code"))
	}
}

// TestDirectiveMCPServerConnection: an mcp_server with `connection gmail`
// sends each tools/call alice's gmail token as its Authorization; before
// she connects, a call answers the connect card and the server sees no
// tools/call.
func TestDirectiveMCPServerConnection(t *testing.T) {
	r := newConnRig(t)
	up := upstreamtest.New()
	mcpURL := up.Serve(t)
	initServer(r.tc, connectedConfig(dataDir(t), r.oauth, r.resource, `mcp_server drive `+mcpURL+` {
				prefix drive_
				connection gmail
				timeout 3s
			}`))
	waitFor(t, "drive's tools listed", func() bool { _, ok := listedTools(t, r.tc)["drive_echo"]; return ok })

	a := r.call(t, "drive_echo", "d1", `{"text":"one"}`)
	if n := len(up.Authorizations()); n != 0 || up.Runs("echo") != 0 {
		t.Fatalf("before alice connected, the server saw %d tools/calls (%d runs)", n, up.Runs("echo"))
	}
	if done := r.connect(t, a); done.Status != "done" || done.IsError || done.Content != "one" {
		t.Fatalf("the call after connecting: %+v", done)
	}
	if a := r.call(t, "drive_echo", "d2", `{"text":"two"}`); a.Status != "done" || a.IsError || a.Content != "two" {
		t.Fatalf("a call once connected: %+v", a)
	}
	tokens := r.oauth.Tokens()
	if len(tokens) != 1 || tokens[0].Subject != "alice@example.com" {
		t.Fatalf("issued %+v, want one token for alice", tokens)
	}
	want := "Bearer " + tokens[0].AccessToken
	if got := up.Authorizations(); len(got) != 2 || got[0] != want || got[1] != want {
		t.Errorf("the tools/calls carried %q, want alice's token twice", got)
	}
	// whoami answers the Authorization it got: the answer does not
	// carry the token on.
	if w := r.call(t, "drive_whoami", "d3"); w.Status != "done" || strings.Contains(w.Content, tokens[0].AccessToken) || !strings.HasPrefix(w.Content, "Bearer ") {
		t.Errorf("whoami: %+v", w)
	}
	if n := up.Runs("echo"); n != 2 {
		t.Errorf("echo ran %d times, want 2", n)
	}
}

// TestConnectionErrorsBeforeTheStore: a connection's mistake is found at
// load (in a JSON config too), before the store opens: the config's own bolt file is never made (and a
// Redis ledger would not be dialled), so the error a user reads is the
// config's.
func TestConnectionErrorsBeforeTheStore(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(h *Handler)
		want string
	}{
		{"token_url in the clear", func(h *Handler) {
			h.Connections = map[string]*Connection{"gmail": {AuthorizeURL: "https://a.example/authorize", TokenURL: "http://a.example/token", ClientID: "gw"}}
		}, `connection "gmail": token_url`},
		{"a key file missing", func(h *Handler) {
			h.Connections = map[string]*Connection{"sts": {Exchange: "https://sts.example/token"}}
			h.ConnectionKeys = []string{"/nonexistent/conn-key"}
		}, "connection_keys: open /nonexistent/conn-key"},
		{"keys and no connection", func(h *Handler) { h.ConnectionKeys = []string{"/nonexistent/conn-key"} }, "connection_keys: no connection is declared"},
		// A JSON config is not adapted: the load checks names too.
		{"named like a component", func(h *Handler) {
			h.Components = map[string]*Component{"api": {BaseURL: "http://127.0.0.1:1"}}
			h.Connections = map[string]*Connection{"api": {Exchange: "https://sts.example/token"}}
		}, `connection "api": a component or mcp server has the same name`},
		{"an mcp server naming an undeclared one", func(h *Handler) {
			h.MCPServers = map[string]*MCPServer{"drive": {URL: "http://127.0.0.1:1/mcp", Connection: "gdrive"}}
		}, `mcp server "drive": connection "gdrive" is not declared`},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ledger.db")
			h, ctx := provisionedPagesHandler(t, path, 1, nil)
			c.set(h)
			err := h.provision(ctx, zap.NewNop())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("provision = %v; want %q", err, c.want)
			}
			if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the ledger was opened before the connections were checked: %v", err)
			}
			if err := h.Cleanup(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
