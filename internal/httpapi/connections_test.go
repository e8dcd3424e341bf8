package httpapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/connect"
	"github.com/toolgate/toolgate/internal/connect/oauthtest"
	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/observe"
)

// connRig is a gateway with connections to a test OAuth server, whose
// resource endpoint the tools call.
type connRig struct {
	*server
	oauth  *oauthtest.Server
	clock  *clock.Manual
	logs   *observer.ObservedLogs
	keys   *connect.Keys
	events *connEvents
}

// connEvents counts the connection events the gateway and its Manager
// tell the observer.
type connEvents struct {
	observe.Observer
	mu     sync.Mutex
	counts map[string]int
}

func (e *connEvents) Connection(name, event string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.counts[name+" "+event]++
}

func (e *connEvents) count(name, event string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.counts[name+" "+event]
}

// connectionsOptions serve, beside the usual tools: mail, a url target
// that sends the user's gmail token in its Authorization header; mail_q,
// the same in a query value; and a second connection, cal.
func newConnRig(t *testing.T, store func(l ledger.Ledger) connect.Store) *connRig {
	t.Helper()
	r := &connRig{clock: clock.NewManual(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))}
	r.oauth = oauthtest.New(t, oauthtest.Options{ClientID: "gw", ClientSecret: "gw-secret", TokenLifetime: 10 * time.Minute, Clock: r.clock.Now})
	resource := httptest.NewServer(r.oauth.ResourceHandler())
	t.Cleanup(resource.Close)
	// echo repeats the credential it was sent, as some error pages do.
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Seen", req.Header.Get("Authorization"))
		_, _ = w.Write([]byte(`{"content":"you sent ` + req.Header.Get("Authorization") + `"}`))
	}))
	t.Cleanup(echo.Close)
	key, err := connect.ParseKey(connect.GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	r.keys, _ = connect.NewKeys(key)
	core, logs := observer.New(zap.DebugLevel)
	r.logs = logs
	r.events = &connEvents{Observer: observe.Nop, counts: map[string]int{}}
	o := gatewayOptions(t, resource.URL)
	o.logger = zap.New(core)
	o.observer = r.events
	o.sources = append(o.sources, manifest.Source{Name: "manifest connected.json", Tools: parseTools(t, `{"tools":[
{"name":"mail","description":"The user's mail.","input_schema":{"type":"object","properties":{"q":{"type":"string"}}},
 "target":{"type":"url","method":"GET","url":"`+resource.URL+`/mail","headers":{"Authorization":"Bearer ${connection.gmail}"},
  "result":"{'content': 'mail of ' + body.subject, 'isError': status != 200}"}},
{"name":"echo","description":"Repeats its credential.","input_schema":{"type":"object"},
 "target":{"type":"url","method":"GET","url":"`+echo.URL+`/","headers":{"Authorization":"Bearer ${connection.gmail}"}}},
{"name":"echo_header","description":"Repeats its credential in a header.","input_schema":{"type":"object"},
 "target":{"type":"url","method":"GET","url":"`+echo.URL+`/","headers":{"Authorization":"Bearer ${connection.gmail}"},"result":"{'content': headers['X-Seen']}"}},
{"name":"mail_q","description":"The user's mail, token in the query.","input_schema":{"type":"object"},
 "target":{"type":"url","method":"GET","url":"http://127.0.0.1:1/down","query":{"access_token":"${connection.gmail}"}}}]}`)})
	o.connections = func(l ledger.Ledger) *connect.Manager {
		// By default in the bolt ledger's file, as the local store keeps
		// them: the file is then searched for tokens.
		var st connect.Store
		switch {
		case store != nil:
			st = store(l)
		case l != nil:
			b, err := connect.NewBolt(ledger.Backend(l).(*ledger.Bolt).DB(), r.clock)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close() })
			st = b
		default:
			st = connect.NewMemory(r.clock)
		}
		m, err := connect.New([]connect.Config{
			{Name: "gmail", AuthorizeURL: r.oauth.AuthorizeURL(), TokenURL: r.oauth.TokenURL(), ClientID: "gw", ClientSecret: "gw-secret", Scopes: []string{"mail.read"}},
			{Name: "cal", AuthorizeURL: r.oauth.AuthorizeURL(), TokenURL: r.oauth.TokenURL(), ClientID: "gw", ClientSecret: "gw-secret"},
		}, connect.Options{Store: st, Keys: r.keys, Clock: r.clock, Logger: zap.New(core), Event: r.events.Connection})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	r.server = startServer(t, o)
	return r
}

// connAnswer is an invoke's or a status's answer with its card.
type connAnswer struct {
	Status  string `json:"status"`
	IsError bool   `json:"isError"`
	Content string `json:"content"`
	Card    struct {
		Title      string `json:"title"`
		Connection struct {
			Name string `json:"name"`
		} `json:"connection"`
		Elements []struct {
			ID  string `json:"id"`
			URL string `json:"url"`
		} `json:"elements"`
	} `json:"card"`
}

func (r *connRig) call(t *testing.T, tool, callID, user, source string) connAnswer {
	t.Helper()
	ctx := `{"source":"api"}`
	if source == "thread" {
		ctx = `{"source":"thread","threadId":"th_1"}`
	}
	status, body := r.Send(t, http.MethodPost, r.URL+"/tools/"+tool, "application/json",
		`{"input":{},"callId":"`+callID+`","context":`+ctx+`,"identity":{"user":"`+user+`","install":"in_1"}}`)
	if status != http.StatusOK {
		t.Fatalf("invoke %s: %d %s", tool, status, body)
	}
	return decodeConn(t, body)
}

func (r *connRig) status(t *testing.T, callID, user string) connAnswer {
	t.Helper()
	status, body := r.Send(t, http.MethodGet, r.URL+"/calls/"+callID+"?user="+user+"&install=in_1", "", "")
	if status != http.StatusOK {
		t.Fatalf("status %s: %d %s", callID, status, body)
	}
	return decodeConn(t, body)
}

func decodeConn(t *testing.T, body string) connAnswer {
	t.Helper()
	var a connAnswer
	if err := json.Unmarshal([]byte(body), &a, json.RejectUnknownMembers(false)); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return a
}

// connectURL is the authorization URL of a connect card.
func connectURL(t *testing.T, a connAnswer) string {
	t.Helper()
	if a.Status != "action_required" || len(a.Card.Elements) != 1 || a.Card.Elements[0].ID != "connect" || a.Card.Elements[0].URL == "" {
		t.Fatalf("want a connect card, got %+v", a)
	}
	return a.Card.Elements[0].URL
}

// callback sends the browser to the gateway's callback the service
// redirected to.
func (r *connRig) callback(t *testing.T, cb *url.URL) (int, string) {
	t.Helper()
	if !strings.HasPrefix(cb.String(), r.URL+"/connections/") {
		t.Fatalf("the service sends the browser to %s, not to the gateway's callback", cb)
	}
	return r.Send(t, http.MethodGet, cb.String(), "", "")
}

// TestConnectionFlow: a call that needs the user's connection answers the
// connect card and sends nothing; the service's authorization page and
// the callback make the connection and run the waiting call once, with
// the user's token; the state works once; another user still gets the
// card; the token refreshes when it expires, and a refresh the service
// refuses brings the card back.
func TestConnectionFlow(t *testing.T) {
	r := newConnRig(t, nil)

	a := r.call(t, "mail", "c1", "alice", "thread")
	auth := connectURL(t, a)
	if a.Card.Title != "Connect Gmail" || a.Card.Connection.Name != "gmail" {
		t.Errorf("card %+v", a.Card)
	}
	if n := len(r.oauth.ResourceHits()); n != 0 {
		t.Fatalf("the resource was called %d times before the user connected", n)
	}
	u, _ := url.Parse(auth)
	if got, want := u.Query().Get("redirect_uri"), r.URL+"/connections/gmail/callback"; got != want {
		t.Errorf("redirect_uri %q, want %q (derived from the request)", got, want)
	}
	if u.Query().Get("code_challenge_method") != "S256" || u.Query().Get("scope") != "mail.read" {
		t.Errorf("authorization URL %s", auth)
	}

	cb := r.oauth.Authorize(t, auth)
	status, page := r.callback(t, cb)
	if status != http.StatusOK || !strings.Contains(page, "Gmail is connected") || !strings.Contains(page, "went on") {
		t.Fatalf("callback: %d %s", status, page)
	}
	if strings.Contains(page, cb.Query().Get("code")) || strings.Contains(page, cb.Query().Get("state")) {
		t.Error("the callback page shows the code or the state")
	}
	hits := r.oauth.ResourceHits()
	if len(hits) != 1 || hits[0].Subject != "alice@example.com" {
		t.Fatalf("resource hits %+v, want one for alice", hits)
	}
	done := r.status(t, "c1", "alice")
	if done.Status != "done" || done.IsError || !strings.Contains(done.Content, "alice@example.com") {
		t.Fatalf("the resumed call: %+v", done)
	}

	// The state works once: the same callback again stores and runs
	// nothing.
	if status, page := r.callback(t, cb); status != http.StatusBadRequest || !strings.Contains(page, "no longer works") {
		t.Errorf("reused state: %d %s", status, page)
	}
	if n := len(r.oauth.ResourceHits()); n != 1 || r.oauth.Count("token", "authorization_code") != 1 {
		t.Errorf("a reused state reached the resource (%d) or the token endpoint (%d)", n, r.oauth.Count("token", "authorization_code"))
	}

	// Connected: the next call goes straight through, once.
	if a := r.call(t, "mail", "c2", "alice", "api"); a.Status != "done" || a.IsError {
		t.Fatalf("connected call: %+v", a)
	}
	if n := len(r.oauth.ResourceHits()); n != 2 {
		t.Fatalf("%d resource hits, want 2", n)
	}

	// Another user is not connected by alice's connection.
	b := r.call(t, "mail", "c3", "bob", "thread")
	connectURL(t, b)
	if api := r.call(t, "mail", "c4", "bob", "api"); !api.IsError || !strings.Contains(api.Content, "connection gmail") || !strings.Contains(api.Content, "thread") {
		t.Errorf("an api call without the connection: %+v", api)
	}
	if n := len(r.oauth.ResourceHits()); n != 2 {
		t.Fatalf("bob's calls reached the resource: %d hits", n)
	}

	// Expired: one refresh, then the call.
	r.clock.Add(10 * time.Minute)
	if a := r.call(t, "mail", "c5", "alice", "api"); a.Status != "done" || a.IsError {
		t.Fatalf("call after expiry: %+v", a)
	}
	if n := r.oauth.Count("token", "refresh_token"); n != 1 {
		t.Fatalf("%d refreshes, want 1", n)
	}

	// A refresh the service refuses deletes the token: the card again.
	r.oauth.FailRefresh("invalid_grant")
	r.clock.Add(10 * time.Minute)
	again := r.call(t, "mail", "c6", "alice", "thread")
	connectURL(t, again)
	if n := len(r.oauth.ResourceHits()); n != 3 {
		t.Fatalf("%d resource hits after a refused refresh, want 3", n)
	}
	r.oauth.FailRefresh("")
	if a := r.call(t, "mail", "c7", "alice", "api"); !a.IsError || !strings.Contains(a.Content, "connection gmail") {
		t.Errorf("after invalid_grant, still connected? %+v", a)
	}
	for _, e := range []struct {
		event string
		want  int
	}{{observe.ConnectionAsked, 3}, {observe.ConnectionMade, 1}, {observe.ConnectionRefreshed, 1}, {observe.ConnectionDropped, 1}} {
		if got := r.events.count("gmail", e.event); got != e.want {
			t.Errorf("connection event %s counted %d times, want %d", e.event, got, e.want)
		}
	}
}

// TestConnectionStates: a state is refused on another connection's
// callback (and spent there), made up, or after its ten minutes; a denial
// at the service ends the waiting call without sending it.
func TestConnectionStates(t *testing.T) {
	r := newConnRig(t, nil)
	stateOf := func(auth string) string {
		u, _ := url.Parse(auth)
		return u.Query().Get("state")
	}

	cb := r.oauth.Authorize(t, connectURL(t, r.call(t, "mail", "s1", "alice", "thread")))
	foreign := r.URL + "/connections/cal/callback?" + cb.RawQuery
	if status, _ := r.Send(t, http.MethodGet, foreign, "", ""); status != http.StatusBadRequest {
		t.Errorf("gmail's state on cal's callback: %d", status)
	}
	if status, _ := r.callback(t, cb); status != http.StatusBadRequest {
		t.Errorf("a state spent on another connection's callback still works: %d", status)
	}
	if status, _ := r.Send(t, http.MethodGet, r.URL+"/connections/gmail/callback?state=made-up&code=x", "", ""); status != http.StatusBadRequest {
		t.Errorf("a made-up state: %d", status)
	}
	if status, _ := r.Send(t, http.MethodGet, r.URL+"/connections/nope/callback?state=x&code=x", "", ""); status != http.StatusBadRequest {
		t.Errorf("an unknown connection: %d", status)
	}

	late := connectURL(t, r.call(t, "mail", "s2", "alice", "thread"))
	lateCB := r.oauth.Authorize(t, late)
	r.clock.Add(connect.FlowTTL + time.Second)
	if status, _ := r.callback(t, lateCB); status != http.StatusBadRequest {
		t.Errorf("a state past its ten minutes: %d", status)
	}
	if r.oauth.Count("token", "authorization_code") != 0 || len(r.oauth.ResourceHits()) != 0 {
		t.Fatal("a refused state reached the token endpoint or the resource")
	}

	// Pressing connect through the Tools API gives a fresh link while
	// the user is not connected.
	status, body := r.Send(t, http.MethodPost, r.URL+"/calls/s2/resume", "application/json", `{"buttonId":"connect","identity":{"user":"alice","install":"in_1"}}`)
	fresh := connectURL(t, decodeConn(t, body))
	if status != http.StatusOK || stateOf(fresh) == stateOf(late) {
		t.Fatalf("pressing connect: %d, the same state again", status)
	}
	// …which works.
	if status, _ := r.callback(t, r.oauth.Authorize(t, fresh)); status != http.StatusOK {
		t.Fatalf("the fresh link: %d", status)
	}
	if a := r.status(t, "s2", "alice"); a.Status != "done" || a.IsError || len(r.oauth.ResourceHits()) != 1 {
		t.Fatalf("the call after the fresh link: %+v, %d hits", a, len(r.oauth.ResourceHits()))
	}

	// Denied at the service: the call ends, nothing is sent.
	r.oauth.Deny(true)
	denied := r.oauth.Authorize(t, connectURL(t, r.call(t, "mail", "s3", "bob", "thread")))
	status, page := r.callback(t, denied)
	if status != http.StatusBadGateway || !strings.Contains(page, "was not connected") {
		t.Errorf("denied: %d %s", status, page)
	}
	if a := r.status(t, "s3", "bob"); a.Status != "done" || !a.IsError || !strings.Contains(a.Content, "did not connect") {
		t.Errorf("the denied call: %+v", a)
	}
	if len(r.oauth.ResourceHits()) != 1 {
		t.Error("a denied call reached the resource")
	}
}

// TestConnectionsList: GET /connections says which are made, never a
// token; DELETE removes the caller's own, and the next call gets the card.
func TestConnectionsList(t *testing.T) {
	r := newConnRig(t, nil)
	r.callback(t, r.oauth.Authorize(t, connectURL(t, r.call(t, "mail", "l1", "alice", "thread"))))
	status, body := r.Send(t, http.MethodGet, r.URL+"/connections?user=alice&install=in_1", "", "")
	if status != http.StatusOK || !strings.Contains(body, `{"name":"gmail","title":"Gmail","connected":true,"scope":"mail.read"`) ||
		!strings.Contains(body, `{"name":"cal","title":"Cal","connected":false}`) {
		t.Fatalf("GET /connections: %d %s", status, body)
	}
	for _, tok := range r.oauth.Tokens() {
		if strings.Contains(body, tok.AccessToken) {
			t.Fatal("GET /connections shows a token")
		}
	}
	if _, body := r.Send(t, http.MethodGet, r.URL+"/connections?user=bob&install=in_1", "", ""); strings.Contains(body, `"connected":true`) {
		t.Errorf("bob sees alice's connection: %s", body)
	}
	if status, body := r.Send(t, http.MethodDelete, r.URL+"/connections/nope?user=alice&install=in_1", "", ""); status != http.StatusNotFound {
		t.Errorf("DELETE an unknown connection: %d %s", status, body)
	}
	if status, body := r.Send(t, http.MethodDelete, r.URL+"/connections/gmail?user=alice&install=in_1", "", ""); status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", status, body)
	}
	connectURL(t, r.call(t, "mail", "l2", "alice", "thread"))
	if status, body := r.Send(t, http.MethodGet, r.URL+"/connections", "", ""); status != http.StatusBadRequest {
		t.Errorf("GET /connections naming no user: %d %s", status, body)
	}
}

// TestConnectionTokensKeptSecret: no token reaches the ledger, the logs,
// an error result, or an answer that repeats it.
func TestConnectionTokensKeptSecret(t *testing.T) {
	r := newConnRig(t, nil)
	r.callback(t, r.oauth.Authorize(t, connectURL(t, r.call(t, "mail", "k1", "alice", "thread"))))
	// The token in a query, to a server that is down: the error names
	// neither the URL's query nor the token.
	down := r.call(t, "mail_q", "k2", "alice", "api")
	if !down.IsError {
		t.Fatalf("a call to a closed port: %+v", down)
	}
	// An answer that repeats the token has it replaced, in its body and
	// in the headers a result expression reads.
	for _, tool := range []string{"echo", "echo_header"} {
		if a := r.call(t, tool, "k-"+tool, "alice", "api"); !strings.Contains(a.Content, "Bearer [connection token]") {
			t.Errorf("%s: %+v", tool, a)
		}
	}
	r.clock.Add(10 * time.Minute)
	r.call(t, "mail", "k3", "alice", "api") // a refresh
	toks := r.oauth.Tokens()
	if len(toks) < 2 {
		t.Fatalf("%d tokens issued, want 2", len(toks))
	}
	r.stop()
	data, err := os.ReadFile(r.boltFile)
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	for _, e := range r.logs.All() {
		logged.WriteString(e.Message)
		for k, v := range e.ContextMap() {
			logged.WriteString(k)
			logged.WriteString(strings.TrimSpace(strings.ReplaceAll(toString(v), "\n", " ")))
		}
	}
	// The secrets: every access token issued, and the refresh tokens,
	// codes and PKCE verifiers the gateway sent the token endpoint.
	var secrets []string
	for _, tok := range toks {
		secrets = append(secrets, tok.AccessToken)
	}
	for _, req := range r.oauth.Requests() {
		if req.Endpoint == "token" {
			secrets = append(secrets, req.Values.Get("refresh_token"), req.Values.Get("code_verifier"))
		}
	}
	{
		for _, secret := range secrets {
			if secret == "" {
				continue
			}
			if bytes.Contains(data, []byte(secret)) {
				t.Errorf("the ledger file holds a token in clear text")
			}
			if strings.Contains(logged.String(), secret) || strings.Contains(down.Content, secret) {
				t.Errorf("a log line or an error result holds a token")
			}
		}
	}
}

func toString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
