package httpapi

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/connect"
	"github.com/toolgate/toolgate/internal/connect/oauthtest"
	"github.com/toolgate/toolgate/internal/ledger"
)

// callbackRig is an API whose connections gmail and cal authorize at a
// test OAuth server, for requests served in the test's goroutine.
type callbackRig struct {
	api   *API
	oauth *oauthtest.Server
	conns *connect.Manager
}

func newCallbackRig(tb testing.TB) *callbackRig {
	tb.Helper()
	r := &callbackRig{oauth: oauthtest.New(tb, oauthtest.Options{ClientID: "gw", ClientSecret: "gw-secret"})}
	key, err := connect.ParseKey(connect.GenerateKey())
	if err != nil {
		tb.Fatal(err)
	}
	keys, err := connect.NewKeys(key)
	if err != nil {
		tb.Fatal(err)
	}
	r.conns = connManager(tb, r.oauth, connect.NewMemory(nil), keys, nil)
	r.api = startConnServer(tb, ledger.Off, r.conns, connTools(tb, "http://127.0.0.1:1")).api
	return r
}

// begin starts a flow of gmail for alice, as a card does, and returns its
// state; with authorize, the code the service then sends the callback.
func (r *callbackRig) begin(t *testing.T, authorize bool) (state, code string) {
	t.Helper()
	link, _, err := r.conns.Begin(t.Context(), "gmail", alice, "", "http://127.0.0.1/connections/gmail/callback")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(link)
	if !authorize {
		return u.Query().Get("state"), ""
	}
	cb := r.oauth.Authorize(t, link)
	return cb.Query().Get("state"), cb.Query().Get("code")
}

var alice = connect.Who{User: "alice", Install: "in_1"}

// callback is the browser's GET of connection name's callback with the
// query values given; empty ones are left out.
func (r *callbackRig) callback(name, state, code, errCode string) *httptest.ResponseRecorder {
	q := url.Values{}
	for k, v := range map[string]string{"state": state, "code": code, "error": errCode} {
		if v != "" {
			q.Set(k, v)
		}
	}
	req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/connections/"+url.PathEscape(name)+"/callback?"+q.Encode(), nil)
	req.RemoteAddr = "203.0.113.7:4000" // the browser may be anywhere
	w := httptest.NewRecorder()
	r.api.ServeHTTP(w, req)
	return w
}

// The ways FuzzCallback makes a callback's state and code.
const (
	madeUp       = iota // the fuzzer's state and code
	realState           // a state a card made, the fuzzer's code
	realCode            // the fuzzer's state, a code the service issued for another
	realBoth            // a card's state and the code the service sent with it
	callbackWays        // how many
)

// FuzzCallback sends the callback what a hostile page could: any
// connection name, state, code and error, beside states cards made and
// codes the service issued (way). It never answers a 5xx but 503, or a
// 502 for a state no card made; it shows no state, code or token (with
// the fuzzer's own, its page is the one a state and a code of no meaning
// get); and a token is stored only for a card's state with its own code,
// on its own connection, never for a made-up one.
func FuzzCallback(f *testing.F) {
	f.Add("gmail", "made-up", "code", "", uint8(madeUp))
	f.Add("gmail", "", "", "access_denied", uint8(realState))
	f.Add("gmail", "", "a-code-of-no-use", "", uint8(realState))
	f.Add("cal", "", "x", "", uint8(realState))
	f.Add("gmail", "made-up", "", "", uint8(realCode))
	f.Add("gmail", "", "", "", uint8(realBoth))
	f.Add("cal", "", "", "", uint8(realBoth))
	f.Add("gmail", "", "", "access_denied", uint8(realBoth))
	f.Add("nope", strings.Repeat("s", 600), "c", "", uint8(madeUp))
	f.Add("gmail", "s\x00t", "<script>alert(1)</script>", `"><img src=x>`, uint8(madeUp))
	f.Add("..", "s", "c", "e", uint8(madeUp))
	f.Add("gmail/../cal", "s", "c", "", uint8(realState))
	f.Add("", "", "", "", uint8(madeUp))
	r := newCallbackRig(f)
	f.Fuzz(func(t *testing.T, name, state, code, errCode string, way uint8) {
		way %= callbackWays
		issued := len(r.oauth.Tokens())
		var secrets []string
		switch way {
		case realState:
			state, _ = r.begin(t, false)
			secrets = append(secrets, state)
		case realCode:
			_, code = r.begin(t, true)
			secrets = append(secrets, code)
		case realBoth:
			state, code = r.begin(t, true)
			secrets = append(secrets, state, code)
		}
		got := r.callback(name, state, code, errCode)
		ok := way == realBoth && name == "gmail" && errCode == ""

		switch {
		case got.Code == http.StatusBadGateway && (way == madeUp || way == realCode):
			t.Fatalf("a made-up state: 502 %s", got.Body)
		case got.Code >= 500 && got.Code != http.StatusServiceUnavailable && got.Code != http.StatusBadGateway:
			t.Fatalf("callback: %d %s", got.Code, got.Body)
		case got.Code == http.StatusOK != ok:
			t.Fatalf("callback (way %d): %d %s", way, got.Code, got.Body)
		}
		if strings.HasPrefix(got.Header().Get("Content-Type"), "text/html") {
			h := got.Header()
			if h.Get("Cache-Control") != "no-store" || h.Get("Referrer-Policy") != "no-referrer" || !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") {
				t.Fatalf("callback page headers %v", h)
			}
		}
		toks := r.oauth.Tokens()
		for _, tok := range toks {
			secrets = append(secrets, tok.AccessToken)
		}
		for _, secret := range secrets {
			if strings.Contains(got.Body.String(), secret) {
				t.Fatalf("the page shows a state, code or token: %s", got.Body)
			}
		}
		if way == madeUp || way == realState {
			// The fuzzer's state or code: the page must not depend on
			// them, for it to show neither.
			refState, refCode := "S", ""
			if way == realState {
				refState, _ = r.begin(t, false)
			}
			if code != "" {
				refCode = "C"
			}
			if ref := r.callback(name, refState, refCode, errCode); got.Code != ref.Code || got.Body.String() != ref.Body.String() {
				t.Fatalf("the page depends on the state or the code:\n%d %s\nwhere one of no meaning gets\n%d %s", got.Code, got.Body, ref.Code, ref.Body)
			}
		}

		want := 0
		if ok {
			want = 1
		}
		if n := len(toks) - issued; n != want {
			t.Fatalf("the service issued %d tokens, want %d", n, want)
		}
		list, err := r.conns.List(t.Context(), alice)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list {
			if s.Connected != (ok && s.Name == "gmail") {
				t.Fatalf("way %d, connection %s: alice connected %v", way, s.Name, s.Connected)
			}
		}
		if err := r.conns.Disconnect(t.Context(), "gmail", alice); err != nil {
			t.Fatal(err)
		}
	})
}
