package httpapi

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/apitest"
	"github.com/toolgate/toolgate/internal/clienttools"
	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/connect"
	"github.com/toolgate/toolgate/internal/connect/oauthtest"
	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/outbound"
	"github.com/toolgate/toolgate/internal/redistest"
)

// connTools are the tools of the connection tests on more than one
// instance: mail sends the user's gmail token to the resource's /mail,
// agenda their cal token to its /agenda.
func connTools(tb testing.TB, resource string) []manifest.Source {
	tb.Helper()
	f, err := manifest.Parse([]byte(`{"tools":[
{"name":"mail","description":"The user's mail.","input_schema":{"type":"object"},
 "target":{"type":"url","method":"GET","url":"` + resource + `/mail","headers":{"Authorization":"Bearer ${connection.gmail}"},
  "result":"{'content': 'mail of ' + body.subject, 'isError': status != 200}"}},
{"name":"agenda","description":"The user's agenda.","input_schema":{"type":"object"},
 "target":{"type":"url","method":"GET","url":"` + resource + `/agenda","headers":{"Authorization":"Bearer ${connection.cal}"},
  "result":"{'content': 'agenda of ' + body.subject, 'isError': status != 200}"}}]}`))
	if err != nil {
		tb.Fatal(err)
	}
	return []manifest.Source{{Name: "manifest connected.json", Tools: f.Tools}}
}

// connManager is the gateway's Manager of gmail and cal, both at oauth,
// on st, keys and c.
func connManager(tb testing.TB, oauth *oauthtest.Server, st connect.Store, keys *connect.Keys, c clock.Clock) *connect.Manager {
	tb.Helper()
	m, err := connect.New([]connect.Config{
		{Name: "gmail", AuthorizeURL: oauth.AuthorizeURL(), TokenURL: oauth.TokenURL(), ClientID: "gw", ClientSecret: "gw-secret", Scopes: []string{"mail.read"}},
		{Name: "cal", AuthorizeURL: oauth.AuthorizeURL(), TokenURL: oauth.TokenURL(), ClientID: "gw", ClientSecret: "gw-secret"},
	}, connect.Options{Store: st, Keys: keys, Clock: c})
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// startConnServer serves sources over a gateway on ledger l (which the
// caller closes) with the connections of m: startServer for a ledger
// other than a bolt file, such as one instance's Redis ledger.
func startConnServer(tb testing.TB, l ledger.Ledger, m *connect.Manager, sources []manifest.Source) *server {
	tb.Helper()
	env := dispatch.Env{Connections: map[string]bool{}}
	for _, name := range m.Names() {
		env.Connections[name] = true
	}
	tools, err := manifest.CompileIn(sources, env)
	if err != nil {
		tb.Fatal(err)
	}
	key, err := identity.GenerateKey()
	if err != nil {
		tb.Fatal(err)
	}
	issuer := identity.NewIssuer("toolgate", time.Minute, key)
	s := &server{ledger: l, bridge: clienttools.NewBridge()}
	gw := gateway.New(gateway.Config{
		Tools: tools, Issuer: issuer, Client: outbound.NewClient(5*time.Second, 1<<20),
		Ledger: l, Bridge: s.bridge, Connections: m,
	})
	if s.api, err = New(Config{Gateway: gw, Bridge: s.bridge, JWKS: issuer.JWKS(), StateSeed: key.Private.Seed()}); err != nil {
		tb.Fatal(err)
	}
	s.srv = httptest.NewServer(s.api)
	s.URL = s.srv.URL
	addr := s.srv.Listener.Addr().String()
	s.client = &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}},
	}
	s.Client = apitest.Client{HTTP: s.client, Base: s.URL}
	tb.Cleanup(func() {
		s.srv.CloseClientConnections()
		s.srv.Close()
		s.client.CloseIdleConnections()
	})
	return s
}

// redisConnRig is two instances, a and b, on one redis-server: each its
// own Redis ledger, gateway and connect.Manager on the ledger's client
// and prefix, with the same connection keys; one manual clock for both
// Managers and the test OAuth server, whose resource the tools call.
type redisConnRig struct {
	a, b     *server
	oauth    *oauthtest.Server
	clock    *clock.Manual
	rdb      *redis.Client
	prefix   string
	managers [2]*connect.Manager
	// states are those of every connect card the rig was given.
	states []string
}

// connectURL is connectURL, keeping the link's state.
func (r *redisConnRig) connectURL(t *testing.T, a connAnswer) string {
	t.Helper()
	link := connectURL(t, a)
	u, err := url.Parse(link)
	if err != nil || u.Query().Get("state") == "" {
		t.Fatalf("a connect card's link without a state: %s", link)
	}
	r.states = append(r.states, u.Query().Get("state"))
	return link
}

func newRedisConnRig(t *testing.T) *redisConnRig {
	t.Helper()
	rs := redistest.Start(t)
	r := &redisConnRig{clock: clock.NewManual(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)), prefix: "tg:"}
	r.oauth = oauthtest.New(t, oauthtest.Options{ClientID: "gw", ClientSecret: "gw-secret", TokenLifetime: 10 * time.Minute, Clock: r.clock.Now})
	resource := httptest.NewServer(r.oauth.ResourceHandler())
	t.Cleanup(resource.Close)
	key, err := connect.ParseKey(connect.GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	keys, err := connect.NewKeys(key)
	if err != nil {
		t.Fatal(err)
	}
	instance := func(i int) *server {
		l, err := ledger.OpenRedis(t.Context(), ledger.RedisOptions{Addr: rs.Addr, Prefix: r.prefix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		r.managers[i] = connManager(t, r.oauth, connect.NewRedis(l.Client(), l.Prefix()), keys, r.clock)
		return startConnServer(t, l, r.managers[i], connTools(t, resource.URL))
	}
	r.a, r.b = instance(0), instance(1)
	r.rdb = redis.NewClient(&redis.Options{Addr: rs.Addr})
	t.Cleanup(func() { _ = r.rdb.Close() })
	return r
}

// call invokes tool on s for user at install in_1, in thread th_1 when
// source is "thread".
func (r *redisConnRig) call(t *testing.T, s *server, tool, callID, user, source string) connAnswer {
	t.Helper()
	ctx := `{"source":"api"}`
	if source == "thread" {
		ctx = `{"source":"thread","threadId":"th_1"}`
	}
	status, body := s.Send(t, http.MethodPost, s.URL+"/tools/"+tool, "application/json",
		`{"input":{},"callId":"`+callID+`","context":`+ctx+`,"identity":{"user":"`+user+`","install":"in_1"}}`)
	if status != http.StatusOK {
		t.Fatalf("invoke %s on %s: %d %s", tool, s.URL, status, body)
	}
	return decodeConn(t, body)
}

func (r *redisConnRig) status(t *testing.T, s *server, callID, user string) connAnswer {
	t.Helper()
	status, body := s.Send(t, http.MethodGet, s.URL+"/calls/"+callID+"?user="+user+"&install=in_1", "", "")
	if status != http.StatusOK {
		t.Fatalf("status %s: %d %s", callID, status, body)
	}
	return decodeConn(t, body)
}

// callbackOn sends the browser the service redirected to cb to s's
// callback instead of the instance cb names: a load balancer's choice.
func callbackOn(t *testing.T, s *server, cb *url.URL) (int, string) {
	t.Helper()
	return s.Send(t, http.MethodGet, s.URL+cb.Path+"?"+cb.RawQuery, "", "")
}

// connected reads GET /connections on s for user: which connections are
// made.
func connected(t *testing.T, s *server, user string) map[string]bool {
	t.Helper()
	status, body := s.Send(t, http.MethodGet, s.URL+"/connections?user="+user+"&install=in_1", "", "")
	var list connectionsJSON
	if err := jsonUnmarshal(body, &list); status != http.StatusOK || err != nil {
		t.Fatalf("GET /connections for %s: %d %s (%v)", user, status, body, err)
	}
	out := map[string]bool{}
	for _, c := range list.Connections {
		out[c.Name] = c.Connected
	}
	return out
}

// TestConnectionsAcrossInstances: two instances on one Redis share the
// connections. A connection made through one is used by the other; a
// state made on one is spent on the other, once; an expired token is
// refreshed once for calls on both at the same time; a refused refresh
// on one brings the card back on the other; users' and connections'
// tokens stay apart; and nothing under the prefix holds a secret in
// clear text.
func TestConnectionsAcrossInstances(t *testing.T) {
	r := newRedisConnRig(t)

	// Alice connects through a: her callback comes back to a, which
	// runs the waiting call.
	cb := r.oauth.Authorize(t, r.connectURL(t, r.call(t, r.a, "mail", "c1", "alice", "thread")))
	if !strings.HasPrefix(cb.String(), r.a.URL+"/connections/gmail/callback?") {
		t.Fatalf("the service sends the browser to %s, not to a's callback", cb)
	}
	if status, page := callbackOn(t, r.a, cb); status != http.StatusOK || !strings.Contains(page, "went on") {
		t.Fatalf("callback on a: %d %s", status, page)
	}
	if a := r.status(t, r.b, "c1", "alice"); a.Status != "done" || a.IsError || !strings.Contains(a.Content, "alice@example.com") {
		t.Fatalf("the resumed call, seen from b: %+v", a)
	}
	// A thread call on b goes straight through with her token: no card.
	if a := r.call(t, r.b, "mail", "c2", "alice", "thread"); a.Status != "done" || a.IsError || !strings.Contains(a.Content, "alice@example.com") {
		t.Fatalf("alice's call on b: %+v", a)
	}
	if hits := r.oauth.ResourceHits(); len(hits) != 2 || hits[1].Subject != "alice@example.com" {
		t.Fatalf("resource hits %+v, want two of alice's", hits)
	}

	// Bob's state, made on a, is spent on b, once: b resumes the call a
	// recorded.
	r.oauth.SetSubject("bob@example.com")
	bobCB := r.oauth.Authorize(t, r.connectURL(t, r.call(t, r.a, "mail", "c3", "bob", "thread")))
	if status, page := callbackOn(t, r.b, bobCB); status != http.StatusOK || !strings.Contains(page, "went on") {
		t.Fatalf("a's state on b's callback: %d %s", status, page)
	}
	if a := r.status(t, r.a, "c3", "bob"); a.Status != "done" || a.IsError || !strings.Contains(a.Content, "bob@example.com") {
		t.Fatalf("bob's call, resumed on b, seen from a: %+v", a)
	}
	for _, s := range []*server{r.a, r.b} {
		if status, _ := callbackOn(t, s, bobCB); status != http.StatusBadRequest {
			t.Errorf("the spent state again on %s: %d", s.URL, status)
		}
	}
	if n := r.oauth.Count("token", "authorization_code"); n != 2 {
		t.Fatalf("%d code exchanges, want 2", n)
	}
	if n := len(r.oauth.ResourceHits()); n != 3 {
		t.Fatalf("%d resource hits, want 3", n)
	}

	// Alice's cal through b, a connection of her own beside gmail.
	r.oauth.SetSubject("alice@example.com")
	calCB := r.oauth.Authorize(t, r.connectURL(t, r.call(t, r.b, "agenda", "c4", "alice", "thread")))
	if status, page := callbackOn(t, r.b, calCB); status != http.StatusOK {
		t.Fatalf("cal's callback: %d %s", status, page)
	}

	// Expired: eight calls at once, four on each instance, share one
	// refresh, which the service rotates (a second use of the old
	// refresh token would be refused, and the token deleted).
	r.clock.Add(10 * time.Minute)
	before := len(r.oauth.ResourceHits())
	var wg sync.WaitGroup
	answers := make([]connAnswer, 8)
	errs := make([]error, 8)
	for i := range answers {
		s := r.a
		if i%2 == 1 {
			s = r.b
		}
		wg.Go(func() {
			status, body := s.Send(t, http.MethodPost, s.URL+"/tools/mail", "application/json",
				fmt.Sprintf(`{"input":{},"callId":"r%d","context":{"source":"api"},"identity":{"user":"alice","install":"in_1"}}`, i))
			if status != http.StatusOK {
				errs[i] = fmt.Errorf("call r%d: %d %s", i, status, body)
				return
			}
			errs[i] = jsonUnmarshal(body, &answers[i])
		})
	}
	wg.Wait()
	for i, a := range answers {
		if errs[i] != nil || a.Status != "done" || a.IsError || !strings.Contains(a.Content, "alice@example.com") {
			t.Errorf("call r%d after expiry: %+v %v", i, a, errs[i])
		}
	}
	if n := r.oauth.Count("token", "refresh_token"); n != 1 {
		t.Errorf("%d refresh requests for eight calls on two instances, want 1", n)
	}
	hits := r.oauth.ResourceHits()[before:]
	if len(hits) != 8 {
		t.Errorf("%d resource hits, want 8", len(hits))
	}
	for _, h := range hits {
		if h.Subject != "alice@example.com" {
			t.Errorf("a call sent an invalid token: %+v", h)
		}
	}

	r.noSecretsInRedis(t)

	// Alice's gmail, deleted through b, is gone for a too; her cal and
	// bob's gmail are not.
	if status, body := r.b.Send(t, http.MethodDelete, r.b.URL+"/connections/gmail?user=alice&install=in_1", "", ""); status != http.StatusNoContent {
		t.Fatalf("DELETE on b: %d %s", status, body)
	}
	if got := connected(t, r.a, "alice"); got["gmail"] || !got["cal"] {
		t.Errorf("alice's connections on a after deleting gmail: %v", got)
	}
	if got := connected(t, r.a, "bob"); !got["gmail"] || got["cal"] {
		t.Errorf("bob's connections on a after alice deleted gmail: %v", got)
	}
	r.connectURL(t, r.call(t, r.a, "mail", "c5", "alice", "thread"))
	if a := r.call(t, r.a, "mail", "c6", "bob", "thread"); a.Status != "done" || a.IsError || !strings.Contains(a.Content, "bob@example.com") {
		t.Fatalf("bob's call after alice's delete: %+v", a)
	}

	// A refresh refused on a deletes the token: a thread call on b gets
	// the card, and nothing more reaches the resource.
	r.oauth.FailRefresh("invalid_grant")
	r.clock.Add(10 * time.Minute)
	before = len(r.oauth.ResourceHits())
	if a := r.call(t, r.a, "mail", "c7", "bob", "api"); !a.IsError || !strings.Contains(a.Content, "connected again") {
		t.Fatalf("bob's call on a, his refresh refused: %+v", a)
	}
	r.oauth.FailRefresh("")
	r.connectURL(t, r.call(t, r.b, "mail", "c8", "bob", "thread"))
	if n := len(r.oauth.ResourceHits()) - before; n != 0 {
		t.Errorf("%d resource hits after the refused refresh", n)
	}
	if got := connected(t, r.b, "bob"); got["gmail"] {
		t.Errorf("bob still connected on b after his refresh was refused on a: %v", got)
	}

	r.noSecretsInRedis(t)
}

// noSecretsInRedis reads every key under the rig's prefix, whatever its
// type, and fails if a key or a value holds in clear text an access
// token the service issued, or a refresh token, code or PKCE verifier
// the gateway sent its token endpoint; and if a connections' key or
// value holds a state the gateway sent the authorization page. (A call's
// record holds its connect card, link and state included, which GET
// /calls shows again.) It fails too if no connection token is stored at
// all, so that it cannot pass by reading nothing.
func (r *redisConnRig) noSecretsInRedis(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	var secrets []string
	for _, tok := range r.oauth.Tokens() {
		secrets = append(secrets, tok.AccessToken)
	}
	for _, req := range r.oauth.Requests() {
		for _, k := range []string{"refresh_token", "code", "code_verifier"} {
			if v := req.Values.Get(k); v != "" {
				secrets = append(secrets, v)
			}
		}
	}
	states := r.states
	if len(secrets) < 8 || len(states) < 3 {
		t.Fatalf("only %d secrets and %d states to look for", len(secrets), len(states))
	}
	var tokens int
	iter := r.rdb.Scan(ctx, 0, r.prefix+"*", 100).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		if strings.HasPrefix(key, r.prefix+"conn:token") {
			tokens++
		}
		var values []string
		typ, err := r.rdb.Type(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		switch typ {
		case "string":
			values = []string{r.rdb.Get(ctx, key).Val()}
		case "hash":
			for k, v := range r.rdb.HGetAll(ctx, key).Val() {
				values = append(values, k, v)
			}
		case "zset":
			values = r.rdb.ZRange(ctx, key, 0, -1).Val()
		case "list":
			values = r.rdb.LRange(ctx, key, 0, -1).Val()
		case "set":
			values = r.rdb.SMembers(ctx, key).Val()
		case "none": // gone since the scan
		default:
			t.Errorf("key %q is a %s, which this test does not read", key, typ)
		}
		look := secrets
		if strings.HasPrefix(key, r.prefix+"conn") {
			look = append(slices.Clip(secrets), states...)
		}
		for _, secret := range look {
			if strings.Contains(key, secret) {
				t.Errorf("key %q holds a secret in clear text", key)
			}
			for _, v := range values {
				if strings.Contains(v, secret) {
					t.Errorf("the value of %q holds a secret in clear text", key)
				}
			}
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if tokens == 0 {
		t.Fatalf("no connection token under %q: the scan reads the wrong keys", r.prefix)
	}
}

// jsonUnmarshal decodes an answer as decodeConn does, for a goroutine
// that may not fail the test itself.
func jsonUnmarshal(body string, v any) error {
	return json.Unmarshal([]byte(body), v, json.RejectUnknownMembers(false))
}
