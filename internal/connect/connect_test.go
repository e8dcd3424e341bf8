package connect_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/connect"
	"github.com/toolgate/toolgate/internal/connect/oauthtest"
)

const (
	grantCode     = "authorization_code"
	grantRefresh  = "refresh_token"
	grantExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	callback      = "https://gateway.example/connections/mail/callback"
	lifetime      = 10 * time.Minute
)

var (
	t0    = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	alice = connect.Who{User: "alice", Install: "in_1"}
	bob   = connect.Who{User: "bob", Install: "in_1"}
)

// recordingStore is a Memory that records every Put, so that a test can
// read everything the Manager ever stored. With noTTL it stores without
// expiry, as a back end whose clock is not the test's would: the
// Manager's own expiry checks must then hold alone.
type recordingStore struct {
	*connect.Memory
	noTTL bool

	mu   sync.Mutex
	puts []put
}

type put struct {
	key string
	val []byte
}

func (s *recordingStore) Put(ctx context.Context, key string, val []byte, ttl time.Duration) error {
	s.mu.Lock()
	s.puts = append(s.puts, put{key, bytes.Clone(val)})
	s.mu.Unlock()
	if s.noTTL {
		ttl = 0
	}
	return s.Memory.Put(ctx, key, val, ttl)
}

// all returns every Put so far.
func (s *recordingStore) all() []put {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]put(nil), s.puts...)
}

// last returns the last Put.
func (s *recordingStore) last(t *testing.T) put {
	t.Helper()
	all := s.all()
	if len(all) == 0 {
		t.Fatal("nothing was stored")
	}
	return all[len(all)-1]
}

// env is a Manager and the OAuth server its connections use, on one
// manual clock.
type env struct {
	clock *clock.Manual
	srv   *oauthtest.Server
	store *recordingStore
	keys  *connect.Keys
	m     *connect.Manager
}

// mailConfig is the "mail" connection at srv.
func mailConfig(srv *oauthtest.Server) connect.Config {
	return connect.Config{
		Name: "mail", AuthorizeURL: srv.AuthorizeURL(), TokenURL: srv.TokenURL(),
		ClientID: "gw", ClientSecret: "gw-secret", Scopes: []string{"mail.read", "mail.send"},
		Params: map[string]string{"access_type": "offline", "prompt": "consent"},
	}
}

// newEnv starts a server for client gw and a Manager with the "mail"
// connection and those conns makes of the server.
func newEnv(t *testing.T, conns func(*oauthtest.Server) []connect.Config) *env {
	t.Helper()
	e := &env{clock: clock.NewManual(t0)}
	e.srv = oauthtest.New(t, oauthtest.Options{ClientID: "gw", ClientSecret: "gw-secret", TokenLifetime: lifetime, Clock: e.clock.Now})
	e.store = &recordingStore{Memory: connect.NewMemory(e.clock)}
	keys, err := connect.NewKeys(newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	e.keys = keys
	cs := []connect.Config{mailConfig(e.srv)}
	if conns != nil {
		cs = append(cs, conns(e.srv)...)
	}
	e.m, err = connect.New(cs, connect.Options{Store: e.store, Keys: keys, Clock: e.clock,
		IdentityToken: func(user, install, aud string) (string, error) { return "jwt-for-" + user, nil }})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// authorize begins a flow of connection name for w and has the user
// consent: it returns the state and the code the callback gets.
func (e *env) authorize(t *testing.T, name string, w connect.Who, callID string) (state, code string) {
	t.Helper()
	authURL, _, err := e.m.Begin(t.Context(), name, w, callID, callback)
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	cb := e.srv.Authorize(t, authURL)
	if cb.Query().Get("error") != "" {
		t.Fatalf("the authorization page answered %s", cb.RawQuery)
	}
	return cb.Query().Get("state"), cb.Query().Get("code")
}

// connect runs the whole flow of "mail" for w and returns its token.
func (e *env) connect(t *testing.T, w connect.Who) string {
	t.Helper()
	state, code := e.authorize(t, "mail", w, "call_1")
	if _, err := e.m.Complete(t.Context(), "mail", state, code, ""); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	tok, err := e.m.Token(t.Context(), "mail", w)
	if err != nil {
		t.Fatalf("Token after the flow: %v", err)
	}
	return tok
}

// notConnected fails the test unless err is a *NotConnectedError of
// connection name, and returns it.
func notConnected(t *testing.T, err error, name string) *connect.NotConnectedError {
	t.Helper()
	var nc *connect.NotConnectedError
	if !errors.As(err, &nc) || !errors.Is(err, connect.ErrNotConnected) {
		t.Fatalf("err = %v, want a *NotConnectedError", err)
	}
	if nc.Name != name || !strings.Contains(err.Error(), name) {
		t.Fatalf("err = %v (name %q), want connection %s named", err, nc.Name, name)
	}
	return nc
}

func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func TestBegin(t *testing.T) {
	e := newEnv(t, func(srv *oauthtest.Server) []connect.Config {
		drive := mailConfig(srv)
		drive.Name, drive.RedirectURL = "drive", "https://tools.example/connections/drive/callback"
		return []connect.Config{drive, {Name: "api", Exchange: srv.ExchangeURL()}}
	})
	authURL, expires, err := e.m.Begin(t.Context(), "mail", alice, "call_1", callback)
	if err != nil {
		t.Fatal(err)
	}
	if !expires.Equal(t0.Add(connect.FlowTTL)) {
		t.Fatalf("expires %v, want %v", expires, t0.Add(connect.FlowTTL))
	}
	u, err := url.Parse(authURL)
	if err != nil {
		t.Fatal(err)
	}
	if got := u.Scheme + "://" + u.Host + u.Path; got != e.srv.AuthorizeURL() {
		t.Fatalf("the URL leads to %s, want %s", got, e.srv.AuthorizeURL())
	}
	q := u.Query()
	want := map[string]string{
		"response_type": "code", "client_id": "gw", "redirect_uri": callback, "scope": "mail.read mail.send",
		"code_challenge_method": "S256", "access_type": "offline", "prompt": "consent",
	}
	for k, v := range want {
		if q.Get(k) != v {
			t.Errorf("%s = %q, want %q", k, q.Get(k), v)
		}
	}
	state, challenge := q.Get("state"), q.Get("code_challenge")
	if raw, err := base64.RawURLEncoding.Strict().DecodeString(challenge); err != nil || len(raw) != sha256.Size {
		t.Errorf("code_challenge %q is not an S256 challenge", challenge)
	}
	if len(state) < 32 {
		t.Errorf("state %q is short enough to guess", state)
	}
	if q.Has("code_verifier") || q.Has("client_secret") {
		t.Errorf("the authorization URL holds a secret: %s", u.RawQuery)
	}
	for _, p := range e.store.all() {
		if strings.Contains(p.key, state) || bytes.Contains(p.val, []byte(state)) {
			t.Errorf("the store holds the state in clear text under %q", p.key)
		}
	}
	again, _, err := e.m.Begin(t.Context(), "mail", alice, "call_1", callback)
	if err != nil {
		t.Fatal(err)
	}
	if u2, _ := url.Parse(again); u2.Query().Get("state") == state || u2.Query().Get("code_challenge") == challenge {
		t.Error("two flows share a state or a challenge")
	}

	// A connection's redirect_url wins over the one the request suggests.
	driveURL, _, err := e.m.Begin(t.Context(), "drive", alice, "", "https://evil.example/cb")
	if err != nil {
		t.Fatal(err)
	}
	if u, _ := url.Parse(driveURL); u.Query().Get("redirect_uri") != "https://tools.example/connections/drive/callback" {
		t.Fatalf("redirect_uri %q, want the connection's", u.Query().Get("redirect_uri"))
	}

	for _, bad := range []string{"", "/connections/mail/callback", "javascript:alert(1)//", "ftp://gateway.example/cb", "https:///cb", "https://gateway.example/%zz"} {
		if _, _, err := e.m.Begin(t.Context(), "mail", alice, "", bad); err == nil || !strings.Contains(err.Error(), "mail") {
			t.Errorf("Begin with redirect %q: %v, want an error naming the connection", bad, err)
		}
	}
	for _, name := range []string{"api", "nope"} {
		if _, _, err := e.m.Begin(t.Context(), name, alice, "", callback); err == nil {
			t.Errorf("Begin of %s: no error", name)
		}
	}
}

func TestConnect(t *testing.T) {
	e := newEnv(t, nil)
	authURL, _, err := e.m.Begin(t.Context(), "mail", alice, "call_7", callback)
	if err != nil {
		t.Fatal(err)
	}
	au, _ := url.Parse(authURL)
	cb := e.srv.Authorize(t, authURL)
	flow, err := e.m.Complete(t.Context(), "mail", cb.Query().Get("state"), cb.Query().Get("code"), "")
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if flow.Connection != "mail" || flow.User != "alice" || flow.Install != "in_1" || flow.CallID != "call_7" {
		t.Fatalf("flow %+v, want mail for alice at in_1 on call_7", flow)
	}
	if n := e.srv.Count("token", grantCode); n != 1 {
		t.Fatalf("%d code exchanges, want 1", n)
	}
	var exchanged url.Values
	for _, r := range e.srv.Requests() {
		if r.Endpoint == "token" {
			exchanged = r.Values
		}
	}
	if s256(exchanged.Get("code_verifier")) != au.Query().Get("code_challenge") {
		t.Fatal("the code_verifier sent does not match the flow's code_challenge")
	}
	if exchanged.Get("redirect_uri") != callback {
		t.Fatalf("the code exchange's redirect_uri is %q, want %q", exchanged.Get("redirect_uri"), callback)
	}

	tok, err := e.m.Token(t.Context(), "mail", alice)
	if err != nil {
		t.Fatal(err)
	}
	if sub, ok := e.srv.Valid(tok); !ok || sub != "alice@example.com" {
		t.Fatalf("Valid(token) = %q, %t", sub, ok)
	}
	if again, err := e.m.Token(t.Context(), "mail", alice); err != nil || again != tok {
		t.Fatalf("a second Token = %q, %v; want the same token", again, err)
	}
	if n := e.srv.Count("token", ""); n != 1 {
		t.Fatalf("%d token requests, want the one exchange", n)
	}
}

func TestTokenNotConnected(t *testing.T) {
	e := newEnv(t, nil)
	e.connect(t, alice)
	for _, w := range []connect.Who{bob, {User: "alice", Install: "in_2"}, {User: "alice"}} {
		_, err := e.m.Token(t.Context(), "mail", w)
		if nc := notConnected(t, err, "mail"); nc.Title != "Mail" || nc.Reason != "" {
			t.Fatalf("%+v: title %q reason %q, want Mail and none", w, nc.Title, nc.Reason)
		}
	}
	if _, err := e.m.Token(t.Context(), "nope", alice); err == nil || errors.Is(err, connect.ErrNotConnected) {
		t.Fatalf("Token of an undeclared connection: %v", err)
	}
}

func TestState(t *testing.T) {
	t.Run("single use", func(t *testing.T) {
		e := newEnv(t, nil)
		state, code := e.authorize(t, "mail", alice, "call_1")
		if _, err := e.m.Complete(t.Context(), "mail", state, code, ""); err != nil {
			t.Fatal(err)
		}
		if f, err := e.m.Complete(t.Context(), "mail", state, code, ""); !errors.Is(err, connect.ErrBadState) || f != nil {
			t.Fatalf("a second Complete: %v, %v; want ErrBadState and no flow", f, err)
		}
		if n := e.srv.Count("token", grantCode); n != 1 {
			t.Fatalf("%d code exchanges, want 1", n)
		}
	})
	t.Run("another connection's", func(t *testing.T) {
		e := newEnv(t, func(srv *oauthtest.Server) []connect.Config {
			c := mailConfig(srv)
			c.Name = "drive"
			return []connect.Config{c}
		})
		state, code := e.authorize(t, "mail", alice, "call_1")
		if _, err := e.m.Complete(t.Context(), "drive", state, code, ""); !errors.Is(err, connect.ErrBadState) {
			t.Fatalf("mail's state on drive's callback: %v", err)
		}
		if _, err := e.m.Complete(t.Context(), "mail", state, code, ""); !errors.Is(err, connect.ErrBadState) {
			t.Fatalf("the state tried on drive's callback still works on mail's: %v", err)
		}
		if n := e.srv.Count("token", ""); n != 0 {
			t.Fatalf("%d token requests, want none", n)
		}
		for _, name := range []string{"mail", "drive"} {
			_, err := e.m.Token(t.Context(), name, alice)
			notConnected(t, err, name)
		}
	})
	for _, noTTL := range []bool{false, true} {
		t.Run(fmt.Sprintf("expired,store ttl=%t", !noTTL), func(t *testing.T) {
			e := newEnv(t, nil)
			e.store.noTTL = noTTL
			state, code := e.authorize(t, "mail", alice, "call_1")
			e.clock.Add(connect.FlowTTL)
			if _, err := e.m.Complete(t.Context(), "mail", state, code, ""); !errors.Is(err, connect.ErrBadState) {
				t.Fatalf("a state past FlowTTL: %v", err)
			}
			if n := e.srv.Count("token", ""); n != 0 {
				t.Fatalf("%d token requests, want none", n)
			}
		})
	}
	t.Run("made up", func(t *testing.T) {
		e := newEnv(t, nil)
		state, code := e.authorize(t, "mail", alice, "call_1")
		for _, s := range []string{"", "x", state[:len(state)-1], state + "x", strings.ToUpper(state), strings.Repeat("a", 100000)} {
			if f, err := e.m.Complete(t.Context(), "mail", s, code, ""); !errors.Is(err, connect.ErrBadState) || f != nil {
				t.Fatalf("state %.20q: %v, %v; want ErrBadState", s, f, err)
			}
		}
		if n := e.srv.Count("token", ""); n != 0 {
			t.Fatalf("%d token requests, want none", n)
		}
		// The real state is untouched by the guesses.
		if _, err := e.m.Complete(t.Context(), "mail", state, code, ""); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("denied", func(t *testing.T) {
		e := newEnv(t, nil)
		authURL, _, err := e.m.Begin(t.Context(), "mail", alice, "call_9", callback)
		if err != nil {
			t.Fatal(err)
		}
		e.srv.Deny(true)
		cb := e.srv.Authorize(t, authURL)
		state, errCode := cb.Query().Get("state"), cb.Query().Get("error")
		if errCode != "access_denied" {
			t.Fatalf("the authorization page answered %s", cb.RawQuery)
		}
		f, err := e.m.Complete(t.Context(), "mail", state, "", errCode)
		var de *connect.DeniedError
		if !errors.As(err, &de) || de.Code != "access_denied" {
			t.Fatalf("Complete: %v, want a *DeniedError of access_denied", err)
		}
		if f == nil || f.CallID != "call_9" || f.User != "alice" {
			t.Fatalf("flow %+v, want call_9's, to end it", f)
		}
		_, err = e.m.Token(t.Context(), "mail", alice)
		notConnected(t, err, "mail")
		if _, err := e.m.Complete(t.Context(), "mail", state, "", errCode); !errors.Is(err, connect.ErrBadState) {
			t.Fatalf("a denied state used again: %v", err)
		}
		if n := e.srv.Count("token", ""); n != 0 {
			t.Fatalf("%d token requests, want none", n)
		}
	})
	t.Run("hostile error code", func(t *testing.T) {
		e := newEnv(t, nil)
		state, _ := e.authorize(t, "mail", alice, "call_1")
		_, err := e.m.Complete(t.Context(), "mail", state, "", strings.Repeat("x", 10000))
		var de *connect.DeniedError
		if !errors.As(err, &de) || len(de.Code) > 100 {
			t.Fatalf("Complete: %.200v, want a *DeniedError with the code clipped", err)
		}
	})
	t.Run("another flow's code", func(t *testing.T) {
		// A code obtained for bob, injected on alice's callback, fails:
		// alice's verifier does not match bob's challenge.
		e := newEnv(t, nil)
		aliceState, _ := e.authorize(t, "mail", alice, "call_1")
		_, bobCode := e.authorize(t, "mail", bob, "call_2")
		f, err := e.m.Complete(t.Context(), "mail", aliceState, bobCode, "")
		if err == nil || errors.Is(err, connect.ErrBadState) || f == nil || f.User != "alice" {
			t.Fatalf("Complete with another flow's code: %v, %v; want a failed exchange on alice's flow", f, err)
		}
		if strings.Contains(err.Error(), bobCode) {
			t.Fatalf("the error repeats the code: %v", err)
		}
		for _, w := range []connect.Who{alice, bob} {
			_, err := e.m.Token(t.Context(), "mail", w)
			notConnected(t, err, "mail")
		}
	})
	t.Run("no code", func(t *testing.T) {
		e := newEnv(t, nil)
		state, _ := e.authorize(t, "mail", alice, "call_1")
		if f, err := e.m.Complete(t.Context(), "mail", state, "", ""); err == nil || f == nil {
			t.Fatalf("Complete without code or error: %v, %v", f, err)
		}
		if n := e.srv.Count("token", ""); n != 0 {
			t.Fatalf("%d token requests, want none", n)
		}
	})
}

func TestRefresh(t *testing.T) {
	e := newEnv(t, nil)
	first := e.connect(t, alice)

	e.clock.Add(8 * time.Minute)
	if tok, err := e.m.Token(t.Context(), "mail", alice); err != nil || tok != first {
		t.Fatalf("Token 2m before expiry: %q, %v; want the same token", tok, err)
	}
	if n := e.srv.Count("token", grantRefresh); n != 0 {
		t.Fatalf("%d refreshes 2m before expiry", n)
	}

	e.clock.Add(90 * time.Second) // 30s before expiry: inside refreshEarly
	next, err := e.m.Token(t.Context(), "mail", alice)
	if err != nil {
		t.Fatal(err)
	}
	if next == first {
		t.Fatal("the token was not refreshed 30s before it expires")
	}
	if n := e.srv.Count("token", grantRefresh); n != 1 {
		t.Fatalf("%d refreshes, want 1", n)
	}
	if sub, ok := e.srv.Valid(next); !ok || sub != "alice@example.com" {
		t.Fatalf("the refreshed token is not valid: %q, %t", sub, ok)
	}
	if again, err := e.m.Token(t.Context(), "mail", alice); err != nil || again != next {
		t.Fatalf("Token after the refresh: %q, %v; want the refreshed one", again, err)
	}

	// The refresh token rotated: the next refresh sends the new one, and
	// the server (which refuses a used one) accepts it.
	e.clock.Add(lifetime)
	third, err := e.m.Token(t.Context(), "mail", alice)
	if err != nil || third == next {
		t.Fatalf("a second refresh: %q, %v", third, err)
	}
	if n := e.srv.Count("token", grantRefresh); n != 2 {
		t.Fatalf("%d refreshes, want 2", n)
	}
}

func TestRefreshOnce(t *testing.T) {
	e := newEnv(t, nil)
	first := e.connect(t, alice)
	e.clock.Add(lifetime + time.Minute)

	const n = 16
	toks, errs := make([]string, n), make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			toks[i], errs[i] = e.m.Token(t.Context(), "mail", alice)
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Token %d: %v", i, errs[i])
		}
		if toks[i] == first || toks[i] != toks[0] {
			t.Fatalf("Token %d = %q, Token 0 = %q: want one new token for all", i, toks[i], toks[0])
		}
	}
	if got := e.srv.Count("token", grantRefresh); got != 1 {
		t.Fatalf("%d refreshes, want 1", got)
	}
	if _, ok := e.srv.Valid(toks[0]); !ok {
		t.Fatal("the refreshed token is not valid")
	}
}

// connected says whether List shows connection name made for w.
func connected(t *testing.T, m *connect.Manager, name string, w connect.Who) bool {
	t.Helper()
	list, err := m.List(t.Context(), w)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.Name == name {
			return s.Connected
		}
	}
	t.Fatalf("List has no %s: %+v", name, list)
	return false
}

func TestRefreshRefused(t *testing.T) {
	e := newEnv(t, nil)
	e.connect(t, alice)
	e.srv.FailRefresh("invalid_grant")
	e.clock.Add(lifetime)

	_, err := e.m.Token(t.Context(), "mail", alice)
	if nc := notConnected(t, err, "mail"); !strings.Contains(nc.Reason, "invalid_grant") {
		t.Fatalf("reason %q, want the service's invalid_grant", nc.Reason)
	}
	if connected(t, e.m, "mail", alice) {
		t.Fatal("List says connected after the refresh was refused")
	}
	e.srv.FailRefresh("")
	_, err = e.m.Token(t.Context(), "mail", alice)
	notConnected(t, err, "mail")
	if n := e.srv.Count("token", grantRefresh); n != 1 {
		t.Fatalf("%d refreshes, want 1: the token is gone", n)
	}
}

func TestRefreshFailsForNow(t *testing.T) {
	e := newEnv(t, nil)
	first := e.connect(t, alice)
	e.srv.FailRefreshStatus(500)
	e.clock.Add(lifetime)

	_, err := e.m.Token(t.Context(), "mail", alice)
	if err == nil || errors.Is(err, connect.ErrNotConnected) {
		t.Fatalf("Token while the service fails: %v, want an error that is not ErrNotConnected", err)
	}
	if !strings.Contains(err.Error(), "mail") || !strings.Contains(err.Error(), "500") {
		t.Fatalf("error %q, want the connection and the status named", err)
	}
	if strings.Contains(err.Error(), "Internal Server Error") {
		t.Fatalf("error %q repeats the answer's body", err)
	}
	if !connected(t, e.m, "mail", alice) {
		t.Fatal("List says not connected: the token was dropped on a 500")
	}
	e.srv.FailRefreshStatus(0)
	tok, err := e.m.Token(t.Context(), "mail", alice)
	if err != nil || tok == first {
		t.Fatalf("Token once the service works again: %q, %v", tok, err)
	}
	if _, ok := e.srv.Valid(tok); !ok {
		t.Fatal("the refreshed token is not valid")
	}
	if n := e.srv.Count("token", grantRefresh); n != 2 {
		t.Fatalf("%d refreshes, want 2", n)
	}
}

func TestTokensSealed(t *testing.T) {
	e := newEnv(t, nil)
	authURL, _, err := e.m.Begin(t.Context(), "mail", alice, "call_1", callback)
	if err != nil {
		t.Fatal(err)
	}
	cb := e.srv.Authorize(t, authURL)
	state, code := cb.Query().Get("state"), cb.Query().Get("code")
	if _, err := e.m.Complete(t.Context(), "mail", state, code, ""); err != nil {
		t.Fatal(err)
	}
	// Two refreshes: the refresh tokens the Manager sends are the ones it
	// stored.
	for range 2 {
		e.clock.Add(lifetime)
		if _, err := e.m.Token(t.Context(), "mail", alice); err != nil {
			t.Fatal(err)
		}
	}

	secrets := map[string]string{"state": state, "code": code}
	for _, tok := range e.srv.Tokens() {
		secrets["access token "+tok.AccessToken[:6]] = tok.AccessToken
	}
	for i, r := range e.srv.Requests() {
		switch r.Values.Get("grant_type") {
		case grantCode:
			secrets["verifier"] = r.Values.Get("code_verifier")
		case grantRefresh:
			secrets[fmt.Sprintf("refresh token %d", i)] = r.Values.Get("refresh_token")
		}
	}
	if len(secrets) != 2+3+1+2 {
		t.Fatalf("found %d secrets, want 8: %v", len(secrets), secrets)
	}
	puts := e.store.all()
	if len(puts) != 4 { // the flow, the token, two refreshes
		t.Fatalf("%d values stored, want 4", len(puts))
	}
	for what, secret := range secrets {
		if secret == "" {
			t.Fatalf("%s is empty", what)
		}
		for _, p := range puts {
			if strings.Contains(p.key, secret) || bytes.Contains(p.val, []byte(secret)) {
				t.Errorf("the store holds the %s in clear text under %q", what, p.key)
			}
		}
	}
}

func TestSealedValueDoesNotOpen(t *testing.T) {
	t.Run("key no longer configured", func(t *testing.T) {
		e := newEnv(t, nil)
		e.connect(t, alice)
		tokenKey := e.store.last(t).key
		other, _ := connect.NewKeys(newKey(t))
		m2, err := connect.New([]connect.Config{mailConfig(e.srv)}, connect.Options{Store: e.store, Keys: other, Clock: e.clock})
		if err != nil {
			t.Fatal(err)
		}
		_, err = m2.Token(t.Context(), "mail", alice)
		notConnected(t, err, "mail")
		// Left as it is: an instance that has the key (keys changed one
		// instance at a time) still opens it.
		if _, err := e.store.Get(t.Context(), tokenKey); err != nil {
			t.Fatalf("a value sealed by a key not configured here was deleted: %v", err)
		}
		if _, err := e.m.Token(t.Context(), "mail", alice); err != nil {
			t.Fatalf("the Manager with the key: %v", err)
		}
	})
	t.Run("moved to another user", func(t *testing.T) {
		e := newEnv(t, nil)
		aliceTok := e.connect(t, alice)
		aliceKey := e.store.last(t)
		e.srv.SetSubject("bob@example.com")
		e.connect(t, bob)
		bobKey := e.store.last(t).key
		if err := e.store.Put(t.Context(), bobKey, aliceKey.val, 0); err != nil {
			t.Fatal(err)
		}
		_, err := e.m.Token(t.Context(), "mail", bob)
		notConnected(t, err, "mail")
		if tok, err := e.m.Token(t.Context(), "mail", alice); err != nil || tok != aliceTok {
			t.Fatalf("alice's own token: %q, %v", tok, err)
		}
	})
}

func TestDisconnectAndList(t *testing.T) {
	e := newEnv(t, func(srv *oauthtest.Server) []connect.Config {
		drive := mailConfig(srv)
		drive.Name, drive.Title = "drive", "Google Drive"
		return []connect.Config{drive}
	})
	tok := e.connect(t, alice)
	e.connect(t, bob)
	refreshTok := ""
	e.clock.Add(lifetime)
	if _, err := e.m.Token(t.Context(), "mail", alice); err != nil {
		t.Fatal(err)
	}
	for _, r := range e.srv.Requests() {
		if r.Values.Get("grant_type") == grantRefresh {
			refreshTok = r.Values.Get("refresh_token")
		}
	}

	list, err := e.m.List(t.Context(), alice)
	if err != nil {
		t.Fatal(err)
	}
	now := t0.Add(lifetime)
	want := []connect.Status{
		{Name: "drive", Title: "Google Drive"},
		{Name: "mail", Title: "Mail", Connected: true, Scope: "mail.read mail.send", Since: now, Expires: now.Add(lifetime)},
	}
	if fmt.Sprint(list) != fmt.Sprint(want) {
		t.Fatalf("List = %+v\nwant   %+v", list, want)
	}
	raw, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range e.srv.Tokens() {
		if bytes.Contains(raw, []byte(tk.AccessToken)) {
			t.Fatalf("List's JSON holds a token: %s", raw)
		}
	}
	if refreshTok == "" || bytes.Contains(raw, []byte(refreshTok)) || bytes.Contains(raw, []byte(tok)) {
		t.Fatalf("List's JSON holds a refresh token: %s", raw)
	}
	if !bytes.Contains(raw, []byte(`"connected":false`)) {
		t.Fatalf("List's JSON does not say a connection is not made: %s", raw)
	}

	if err := e.m.Disconnect(t.Context(), "mail", alice); err != nil {
		t.Fatal(err)
	}
	if connected(t, e.m, "mail", alice) {
		t.Fatal("List says connected after Disconnect")
	}
	_, err = e.m.Token(t.Context(), "mail", alice)
	notConnected(t, err, "mail")
	if !connected(t, e.m, "mail", bob) {
		t.Fatal("alice's Disconnect dropped bob's token")
	}
	if err := e.m.Disconnect(t.Context(), "mail", alice); err != nil {
		t.Fatalf("Disconnect of what is not made: %v", err)
	}
	if err := e.m.Disconnect(t.Context(), "nope", alice); err == nil {
		t.Fatal("Disconnect of an undeclared connection: no error")
	}
}

// exchangeEnv is a Manager with the exchange connection "api", whose
// identity tokens are "jwt-for-USER-AUD", and a server that takes
// such a token's USER as its subject and refuses mallory's.
func exchangeEnv(t *testing.T) *env {
	t.Helper()
	e := &env{clock: clock.NewManual(t0)}
	e.srv = oauthtest.New(t, oauthtest.Options{TokenLifetime: lifetime, Clock: e.clock.Now,
		VerifySubject: func(tok string) (string, error) {
			user, _, _ := strings.Cut(strings.TrimPrefix(tok, "jwt-for-"), "-")
			if user == "mallory" {
				return "", errors.New("mallory is banned")
			}
			return user, nil
		}})
	e.store = &recordingStore{Memory: connect.NewMemory(e.clock)}
	e.keys, _ = connect.NewKeys(newKey(t))
	var err error
	e.m, err = connect.New([]connect.Config{{Name: "api", Exchange: e.srv.ExchangeURL(), Audience: "api://x"}}, connect.Options{
		Store: e.store, Keys: e.keys, Clock: e.clock,
		IdentityToken: func(user, install, aud string) (string, error) {
			if user == "eve" {
				return "", errors.New("no key to sign with")
			}
			return "jwt-for-" + user + "-" + aud, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestExchange(t *testing.T) {
	e := exchangeEnv(t)
	tok, err := e.m.Token(t.Context(), "api", alice)
	if err != nil {
		t.Fatal(err)
	}
	if n := e.srv.Count("exchange", grantExchange); n != 1 {
		t.Fatalf("%d exchanges, want 1", n)
	}
	r := e.srv.Requests()[0].Values
	if r.Get("subject_token_type") != "urn:ietf:params:oauth:token-type:jwt" || r.Get("audience") != "api://x" || r.Get("subject_token") != "jwt-for-alice-api" {
		t.Fatalf("the exchange sent %v", r)
	}
	if sub, ok := e.srv.Valid(tok); !ok || sub != "alice" {
		t.Fatalf("Valid(token) = %q, %t; want alice's", sub, ok)
	}
	if sealed := e.store.last(t).val; bytes.Contains(sealed, []byte(tok)) {
		t.Fatal("the exchanged token is stored in clear text")
	}

	e.clock.Add(5 * time.Minute)
	if again, err := e.m.Token(t.Context(), "api", alice); err != nil || again != tok {
		t.Fatalf("Token before expiry: %q, %v; want the same token", again, err)
	}
	if n := e.srv.Count("exchange", ""); n != 1 {
		t.Fatalf("%d exchanges before expiry, want 1", n)
	}
	bobTok, err := e.m.Token(t.Context(), "api", bob)
	if sub, _ := e.srv.Valid(bobTok); err != nil || sub != "bob" {
		t.Fatalf("bob's token: %q (subject %q), %v", bobTok, sub, err)
	}

	e.clock.Add(5 * time.Minute)
	next, err := e.m.Token(t.Context(), "api", alice)
	if err != nil || next == tok {
		t.Fatalf("Token after expiry: %q, %v; want a new token", next, err)
	}
	if n := e.srv.Count("exchange", ""); n != 3 {
		t.Fatalf("%d exchanges, want 3 (alice twice, bob once)", n)
	}

	list, err := e.m.List(t.Context(), alice)
	if err != nil || len(list) != 1 || !list[0].Exchange || !list[0].Connected {
		t.Fatalf("List = %+v, %v; want api, an exchange, connected", list, err)
	}
}

func TestExchangeRefusals(t *testing.T) {
	e := exchangeEnv(t)
	tests := []struct {
		name      string
		w         connect.Who
		exchanges int // requests the exchange endpoint gets
		why       string
	}{
		{"refused by the service", connect.Who{User: "mallory", Install: "in_1"}, 1, "refused (HTTP 400 invalid_grant"},
		{"no user", connect.Who{Install: "in_1"}, 0, "names no user"},
		{"signing fails", connect.Who{User: "eve", Install: "in_1"}, 0, "signing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.srv.Count("exchange", "")
			_, err := e.m.Token(t.Context(), "api", tt.w)
			if err == nil || errors.Is(err, connect.ErrNotConnected) || !strings.Contains(err.Error(), "api") || !strings.Contains(err.Error(), tt.why) {
				t.Fatalf("Token: %v, want an error naming api and saying %q, not ErrNotConnected", err, tt.why)
			}
			if n := e.srv.Count("exchange", "") - before; n != tt.exchanges {
				t.Fatalf("%d exchanges, want %d", n, tt.exchanges)
			}
			if connected(t, e.m, "api", tt.w) {
				t.Fatal("List says connected")
			}
		})
	}
}

func TestNew(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{})
	store := connect.NewMemory(nil)
	keys, _ := connect.NewKeys(newKey(t))
	mail := mailConfig(srv)
	api := connect.Config{Name: "api", Exchange: srv.ExchangeURL()}
	sign := func(user, install, aud string) (string, error) { return "jwt", nil }

	m, err := connect.New([]connect.Config{mail, api}, connect.Options{Store: store, Keys: keys, IdentityToken: sign})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(m.Names()); got != "[api mail]" {
		t.Fatalf("Names = %s, want [api mail]", got)
	}
	if c, ok := m.Lookup("mail"); !ok || c.Title != "Mail" {
		t.Fatalf("Lookup(mail) = %+v, %t; want it checked, its title filled", c, ok)
	}

	bad := mail
	bad.ClientID = ""
	tests := []struct {
		name  string
		conns []connect.Config
		o     connect.Options
		want  string
	}{
		{"duplicate", []connect.Config{mail, mail}, connect.Options{Store: store, Keys: keys}, `"mail" is declared twice`},
		{"exchange without identity tokens", []connect.Config{api}, connect.Options{Store: store, Keys: keys}, `"api": exchange needs`},
		{"no store", nil, connect.Options{Keys: keys}, "a store and keys"},
		{"no keys", nil, connect.Options{Store: store}, "a store and keys"},
		{"bad config", []connect.Config{bad}, connect.Options{Store: store, Keys: keys}, "client_id is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := connect.New(tt.conns, tt.o); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// stubEndpoint is a token endpoint that answers what the test says, for
// answers oauthtest never gives. It records the forms it receives.
type stubEndpoint struct {
	url string

	mu     sync.Mutex
	answer func(form url.Values) (status int, body string)
	forms  []url.Values
}

func newStubEndpoint(t *testing.T) *stubEndpoint {
	t.Helper()
	s := &stubEndpoint{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Errorf("stub: %v", err)
		}
		s.mu.Lock()
		s.forms = append(s.forms, r.PostForm)
		status, body := s.answer(r.PostForm)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL + "/token"
	return s
}

func (s *stubEndpoint) setAnswer(f func(form url.Values) (int, string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answer = f
}

func (s *stubEndpoint) received() []url.Values {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]url.Values(nil), s.forms...)
}

// stubEnv is a Manager whose "mail" connection's token endpoint is a
// stubEndpoint. Its flows are completed without the authorization page:
// the stub takes any code.
func stubEnv(t *testing.T) (*env, *stubEndpoint) {
	t.Helper()
	stub := newStubEndpoint(t)
	e := &env{clock: clock.NewManual(t0)}
	e.store = &recordingStore{Memory: connect.NewMemory(e.clock)}
	e.keys, _ = connect.NewKeys(newKey(t))
	var err error
	e.m, err = connect.New([]connect.Config{{Name: "mail", AuthorizeURL: "https://accounts.example/auth", TokenURL: stub.url, ClientID: "gw"}},
		connect.Options{Store: e.store, Keys: e.keys, Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	return e, stub
}

// complete begins a flow of "mail" for alice and completes it with a code
// the stub takes.
func (e *env) complete(t *testing.T) error {
	t.Helper()
	authURL, _, err := e.m.Begin(t.Context(), "mail", alice, "call_1", callback)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(authURL)
	_, err = e.m.Complete(t.Context(), "mail", u.Query().Get("state"), "code-1", "")
	return err
}

func TestRefreshKeepsTheRefreshToken(t *testing.T) {
	e, stub := stubEnv(t)
	n := 0 // the stub calls answer under its lock
	stub.setAnswer(func(form url.Values) (int, string) {
		n++
		if form.Get("grant_type") == grantCode {
			return 200, `{"access_token":"at-1","token_type":"Bearer","expires_in":600,"refresh_token":"rt-1"}`
		}
		// A service that keeps its refresh token answers none.
		return 200, `{"access_token":"at-` + fmt.Sprint(n) + `","token_type":"Bearer","expires_in":600}`
	})
	if err := e.complete(t); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		e.clock.Add(lifetime)
		if _, err := e.m.Token(t.Context(), "mail", alice); err != nil {
			t.Fatal(err)
		}
	}
	forms := stub.received()
	if len(forms) != 3 {
		t.Fatalf("%d token requests, want the code and two refreshes", len(forms))
	}
	for _, f := range forms[1:] {
		if f.Get("refresh_token") != "rt-1" {
			t.Fatalf("a refresh sent refresh_token %q, want the one the service kept, rt-1", f.Get("refresh_token"))
		}
	}
}

func TestExpiredWithoutRefreshToken(t *testing.T) {
	e, stub := stubEnv(t)
	stub.setAnswer(func(url.Values) (int, string) {
		return 200, `{"access_token":"at-1","token_type":"Bearer","expires_in":600}`
	})
	if err := e.complete(t); err != nil {
		t.Fatal(err)
	}
	if tok, err := e.m.Token(t.Context(), "mail", alice); err != nil || tok != "at-1" {
		t.Fatalf("Token: %q, %v", tok, err)
	}
	e.clock.Add(lifetime)
	_, err := e.m.Token(t.Context(), "mail", alice)
	if nc := notConnected(t, err, "mail"); nc.Reason == "" {
		t.Fatal("no reason given for the token that is gone")
	}
	if connected(t, e.m, "mail", alice) {
		t.Fatal("the expired token without a refresh token is still listed")
	}
	if n := len(stub.received()); n != 1 {
		t.Fatalf("%d token requests, want only the code's: there is nothing to refresh with", n)
	}
}

// TestHostileTokenEndpoint: what a token endpoint answers reaches an
// error only as its status and OAuth error, clipped; an answer without
// an access token stores nothing.
func TestHostileTokenEndpoint(t *testing.T) {
	long := strings.Repeat("x", 100000)
	tests := []struct {
		name, body string
		status     int
	}{
		{"no access token", `{"token_type":"Bearer","expires_in":600}`, 200},
		{"long error", `{"error":"` + long + `","error_description":"` + long + `"}`, 400},
		{"body echoed", `secret-in-the-body ` + long, 502},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, stub := stubEnv(t)
			stub.setAnswer(func(url.Values) (int, string) { return tt.status, tt.body })
			err := e.complete(t)
			if err == nil || errors.Is(err, connect.ErrBadState) {
				t.Fatalf("Complete: %v, want a failed exchange", err)
			}
			if len(err.Error()) > 400 || strings.Contains(err.Error(), "secret-in-the-body") {
				t.Fatalf("the error repeats the answer: %.300q", err)
			}
			_, err = e.m.Token(t.Context(), "mail", alice)
			notConnected(t, err, "mail")
		})
	}
}

// TestRefreshWithWrongClientKeepsTokens: a token endpoint that refuses the
// gateway's own client (a secret rotated at the service, not yet in the
// config) says nothing of the user's grant: the token is kept, and
// refreshes once the config is right.
func TestRefreshWithWrongClientKeepsTokens(t *testing.T) {
	e := newEnv(t, nil)
	e.connect(t, alice)
	wrong := mailConfig(e.srv)
	wrong.ClientSecret = "stale-secret"
	stale, err := connect.New([]connect.Config{wrong}, connect.Options{Store: e.store, Keys: e.keys, Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Add(lifetime)

	_, err = stale.Token(t.Context(), "mail", alice)
	if err == nil || errors.Is(err, connect.ErrNotConnected) || !strings.Contains(err.Error(), "invalid_client") {
		t.Fatalf("Token with a client the service refuses: %v, want an error naming invalid_client, not ErrNotConnected", err)
	}
	if !connected(t, e.m, "mail", alice) {
		t.Fatal("the user's token was dropped for the gateway's own mistake")
	}
	tok, err := e.m.Token(t.Context(), "mail", alice)
	if err != nil {
		t.Fatalf("Token with the right client: %v", err)
	}
	if _, ok := e.srv.Valid(tok); !ok {
		t.Fatal("the refreshed token is not valid")
	}
}

// TestRefreshRefusals: which answers to a refresh drop the token (the
// grant is gone: the user connects again) and which keep it.
func TestRefreshRefusals(t *testing.T) {
	tests := []struct {
		name, body string
		status     int
		drops      bool
	}{
		{"invalid_grant", `{"error":"invalid_grant"}`, 400, true},
		{"invalid_grant on a 401", `{"error":"invalid_grant"}`, 401, true},
		{"another 400", `{"error":"invalid_scope"}`, 400, true},
		{"invalid_client", `{"error":"invalid_client"}`, 401, false},
		{"invalid_client on a 400", `{"error":"invalid_client"}`, 400, false},
		{"unauthorized_client", `{"error":"unauthorized_client"}`, 400, false},
		{"a 401 without error", `{}`, 401, false},
		{"a 503", `{"error":"temporarily_unavailable"}`, 503, false},
		{"a 429", `slow down`, 429, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, stub := stubEnv(t)
			stub.setAnswer(func(url.Values) (int, string) {
				return 200, `{"access_token":"at-1","token_type":"Bearer","expires_in":600,"refresh_token":"rt-1"}`
			})
			if err := e.complete(t); err != nil {
				t.Fatal(err)
			}
			stub.setAnswer(func(url.Values) (int, string) { return tt.status, tt.body })
			e.clock.Add(lifetime)
			_, err := e.m.Token(t.Context(), "mail", alice)
			if err == nil {
				t.Fatal("Token: no error")
			}
			if dropped := errors.Is(err, connect.ErrNotConnected); dropped != tt.drops {
				t.Fatalf("Token: %v; want NotConnected %t", err, tt.drops)
			}
			if connected(t, e.m, "mail", alice) == tt.drops {
				t.Fatalf("List says connected %t, want %t", !tt.drops, !tt.drops)
			}
		})
	}
}

// TestRefreshRefusedOnce: callers that wait on another's refresh, which
// the service refuses, learn that the user must connect again, and do not
// refresh themselves.
func TestRefreshRefusedOnce(t *testing.T) {
	e := newEnv(t, nil)
	e.connect(t, alice)
	e.srv.FailRefresh("invalid_grant")
	e.clock.Add(lifetime)

	const n = 16
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			_, errs[i] = e.m.Token(t.Context(), "mail", alice)
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		notConnected(t, err, "mail")
	}
	if got := e.srv.Count("token", grantRefresh); got != 1 {
		t.Fatalf("%d refreshes, want 1", got)
	}
}

// TestNoUser: a connection is a user's; a call that names none gets no
// token and starts no flow.
func TestNoUser(t *testing.T) {
	keys, _ := connect.NewKeys(newKey(t))
	m, err := connect.New([]connect.Config{{Name: "gmail", AuthorizeURL: "https://a.example/auth", TokenURL: "https://a.example/token", ClientID: "id"}},
		connect.Options{Store: connect.NewMemory(nil), Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Token(context.Background(), "gmail", connect.Who{Install: "in_1"}); err == nil || errors.Is(err, connect.ErrNotConnected) {
		t.Errorf("Token without a user = %v", err)
	}
	if _, _, err := m.Begin(context.Background(), "gmail", connect.Who{Install: "in_1"}, "c1", "https://tools.example/cb"); err == nil {
		t.Error("Begin without a user started a flow")
	}
}
