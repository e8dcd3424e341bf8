package mcp

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/outbound"
)

// The tests of this file run in a synctest bubble: the SDK's idle timers
// and the sessions' expiry timers run on the bubble's fake clock, so ten
// minutes of idleness pass at once, and a session's goroutines are the
// bubble's, which synctest.Wait lets settle.

// sessionRig is a Server for session tests, behind a bearer check whose
// tokens are "user:exp" (exp in Unix seconds), as httpapi puts a
// verified caller before it.
type sessionRig struct {
	s *Server
	h http.Handler
}

func newSessionRig(t testing.TB, opts Options) *sessionRig {
	t.Helper()
	comp, err := dispatch.NewComponent("api", "http://127.0.0.1:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := manifest.Compile([]manifest.Source{{Name: "test", Tools: []manifest.Tool{{
		Name: "save", Description: "Save.", InputSchema: jsontext.Value(`{"type":"object"}`),
		Target: dispatch.Spec{Type: "app", Component: "api", Method: "POST", Path: "/save"},
	}}}}, map[string]*dispatch.Component{"api": comp})
	if err != nil {
		t.Fatal(err)
	}
	key, err := identity.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway.New(gateway.Config{
		Tools: tools, Issuer: identity.NewIssuer("toolgate", time.Minute, key),
		Client: outbound.NewClient(time.Second, 1<<20),
	})
	s := New(gw, opts)
	// A bubble ends once its goroutines have: let the sessions a test
	// left open idle out.
	t.Cleanup(func() { time.Sleep(s.sessions.limits.IdleTimeout + time.Second) })
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		user, exp, ok := strings.Cut(token, ":")
		sec, err := strconv.ParseInt(exp, 10, 64)
		if !ok || err != nil {
			return nil, auth.ErrInvalidToken
		}
		return Caller{Identity: gateway.Identity{User: user, Install: "in_1"}}.TokenInfo(time.Unix(sec, 0)), nil
	}
	return &sessionRig{s: s, h: auth.RequireBearerToken(verify, nil)(s)}
}

// token is a test token of user, accepted for d from now.
func token(user string, d time.Duration) string {
	return user + ":" + strconv.FormatInt(time.Now().Add(d).Unix(), 10)
}

// do sends an MCP request: body as POST, or a DELETE when body is "";
// token, if any, as a bearer; id as Mcp-Session-Id, if any.
func (r *sessionRig) do(h http.Handler, token, id, body string) *httptest.ResponseRecorder {
	method := http.MethodPost
	if body == "" {
		method = http.MethodDelete
	}
	req := httptest.NewRequest(method, "/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if id != "" {
		req.Header.Set("Mcp-Session-Id", id)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

const (
	initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	ping       = `{"jsonrpc":"2.0","id":2,"method":"ping"}`
)

// open initializes a session with token and returns its id, or fails.
func (r *sessionRig) open(t testing.TB, token string) string {
	t.Helper()
	w := r.do(r.h, token, "", initialize)
	id := w.Header().Get("Mcp-Session-Id")
	if w.Code != http.StatusOK || id == "" || !strings.Contains(w.Body.String(), `"result"`) {
		t.Fatalf("initialize: %d %q, session %q", w.Code, w.Body, id)
	}
	return id
}

// alive reports whether session id answers a ping with token (200), or
// is unknown (404); anything else fails the test.
func (r *sessionRig) alive(t testing.TB, token, id string) bool {
	t.Helper()
	w := r.do(r.h, token, id, ping)
	switch w.Code {
	case http.StatusOK:
		return true
	case http.StatusNotFound:
		return false
	}
	t.Fatalf("ping on %s: %d %q", id, w.Code, w.Body)
	return false
}

// count is the number of open sessions, in all and of user's.
func (r *sessionRig) count(user string) (total, users int) {
	r.s.sessions.mu.Lock()
	defer r.s.sessions.mu.Unlock()
	return r.s.sessions.total, r.s.sessions.perCaller[user+"\x1fin_1"]
}

// refusedOver checks that w refuses a new session naming option.
func refusedOver(t *testing.T, w *httptest.ResponseRecorder, option string) {
	t.Helper()
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), option) || w.Header().Get("Mcp-Session-Id") != "" {
		t.Errorf("over %s: %d %q, want a 429 naming it", option, w.Code, w.Body)
	}
}

// The 65th session of one caller is refused, naming
// max_sessions_per_caller, while another caller still opens one; ending
// a session frees its place.
func TestSessionsPerCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSessionRig(t, Options{})
		alice, bob := token("alice", time.Hour), token("bob", time.Hour)
		var ids []string
		for range DefaultMaxSessionsPerCaller {
			ids = append(ids, r.open(t, alice))
		}
		refusedOver(t, r.do(r.h, alice, "", initialize), "max_sessions_per_caller")
		r.open(t, bob)
		if total, a := r.count("alice"); total != 65 || a != 64 {
			t.Errorf("%d sessions, alice %d; want 65 and 64", total, a)
		}

		if w := r.do(r.h, alice, ids[0], ""); w.Code != http.StatusNoContent {
			t.Fatalf("DELETE: %d %q", w.Code, w.Body)
		}
		synctest.Wait()
		if r.alive(t, alice, ids[0]) {
			t.Error("a deleted session still answers")
		}
		r.open(t, alice)
	})
}

// Over max_sessions, a new session of any caller is refused, naming it,
// until one ends.
func TestSessionsTotal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSessionRig(t, Options{Sessions: SessionLimits{Total: 3}})
		first := r.open(t, token("a", time.Hour))
		r.open(t, token("b", time.Hour))
		r.open(t, token("c", time.Hour))
		refusedOver(t, r.do(r.h, token("d", time.Hour), "", initialize), "max_sessions")
		if w := r.do(r.h, token("a", time.Hour), first, ""); w.Code != http.StatusNoContent {
			t.Fatalf("DELETE: %d %q", w.Code, w.Body)
		}
		synctest.Wait()
		r.open(t, token("d", time.Hour))
	})
}

// A POST that opens no session (one that is not an initialize, or a
// refused one) gives its place back at once.
func TestSessionsUnopenedFreed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSessionRig(t, Options{Sessions: SessionLimits{PerCaller: 1}})
		alice := token("alice", time.Hour)
		r.do(r.h, alice, "", ping)
		bad := r.do(r.h, alice, "", strings.Replace(initialize, `"2025-11-25"`, `7`, 1))
		synctest.Wait()
		if id := bad.Header().Get("Mcp-Session-Id"); id != "" && r.alive(t, alice, id) {
			t.Fatalf("a malformed initialize opened a session: %d %q", bad.Code, bad.Body)
		}
		if total, _ := r.count("alice"); total != 0 {
			t.Fatalf("%d sessions held by POSTs that opened none", total)
		}
		r.open(t, alice)
	})
}

// In loopback mode (no token) every session is the local caller's.
func TestSessionsLoopbackCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSessionRig(t, Options{Sessions: SessionLimits{PerCaller: 2}, LocalIdentity: gateway.Identity{User: "u_local"}})
		for range 2 {
			if w := r.do(r.s, "", "", initialize); w.Code != http.StatusOK {
				t.Fatalf("initialize: %d %q", w.Code, w.Body)
			}
		}
		refusedOver(t, r.do(r.s, "", "", initialize), "max_sessions_per_caller")
	})
}

// A session with no request for the idle timeout is closed: its id is
// unknown (404) and its goroutines are gone. Requests keep it open.
func TestSessionIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSessionRig(t, Options{Sessions: SessionLimits{IdleTimeout: 10 * time.Minute}})
		alice := token("alice", 24*time.Hour)
		synctest.Wait()
		baseline := runtime.NumGoroutine()

		busy, idle := r.open(t, alice), r.open(t, alice)
		for range 3 {
			time.Sleep(9 * time.Minute)
			if !r.alive(t, alice, busy) {
				t.Fatal("a session with a request every 9 minutes idled out")
			}
		}
		if r.alive(t, alice, idle) {
			t.Error("a session idle for 27 minutes still answers")
		}
		time.Sleep(10*time.Minute + time.Second)
		synctest.Wait()
		if r.alive(t, alice, busy) {
			t.Error("a session idle for 10 minutes still answers")
		}
		if total, _ := r.count("alice"); total != 0 {
			t.Errorf("%d sessions counted after both idled out", total)
		}
		synctest.Wait()
		if n := runtime.NumGoroutine(); n > baseline {
			t.Errorf("%d goroutines after the sessions closed, %d before they opened", n, baseline)
		}
	})
}

// A session ends when the token it was opened with stops being
// accepted: a request with a new valid token of the same caller then
// finds it gone. A request with a later token before then moves the end
// to that token's; one with another caller's token moves nothing.
func TestSessionTokenExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSessionRig(t, Options{Sessions: SessionLimits{IdleTimeout: 24 * time.Hour}})
		expiring := r.open(t, token("alice", 5*time.Minute))
		renewed := r.open(t, token("alice", 5*time.Minute))
		other := r.open(t, token("alice", 5*time.Minute))

		time.Sleep(4 * time.Minute)
		if !r.alive(t, token("alice", 15*time.Minute), renewed) {
			t.Fatal("renewing the token on a live session")
		}
		if w := r.do(r.h, token("bob", time.Hour), other, ping); w.Code != http.StatusForbidden {
			t.Errorf("bob on alice's session: %d %q, want 403", w.Code, w.Body)
		}

		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		fresh := token("alice", time.Hour)
		if r.alive(t, fresh, expiring) {
			t.Error("a session outlived its token, with a new one of the same caller")
		}
		if r.alive(t, fresh, other) {
			t.Error("another caller's token kept a session open")
		}
		if !r.alive(t, token("alice", time.Hour), renewed) {
			t.Error("a session whose token was renewed ended at the first token's expiry")
		}
		if total, _ := r.count("alice"); total != 1 {
			t.Errorf("%d sessions counted, want the renewed one", total)
		}

		// The renewal above moved its end to 15 minutes; the pings since
		// with hour-long tokens moved it again, to an hour after them.
		time.Sleep(time.Hour + time.Second)
		synctest.Wait()
		if r.alive(t, token("alice", time.Hour), renewed) {
			t.Error("a renewed session outlived its latest token")
		}
	})
}

// Three thousand sessions left open, as clients that initialize and go
// away leave them, all close at the idle timeout, and what they held is
// given back: the goroutines at once; the memory but for the
// goroutines' descriptors, which the runtime keeps to reuse, so that a
// second three thousand leave no more behind than the first.
func TestSessionsReleased(t *testing.T) {
	const n = 3000
	synctest.Test(t, func(t *testing.T) {
		r := newSessionRig(t, Options{Sessions: SessionLimits{PerCaller: n, Total: n}})
		alice := token("alice", 24*time.Hour)
		synctest.Wait()
		baseG, baseHeap, baseStack := runtime.NumGoroutine(), heapAlloc(), stackInUse()
		var after [2]uint64
		for round := range after {
			for range n {
				r.open(t, alice)
			}
			synctest.Wait()
			openG, openHeap, openStack := runtime.NumGoroutine(), heapAlloc(), stackInUse()
			time.Sleep(DefaultSessionIdleTimeout + time.Second)
			synctest.Wait()
			afterG := runtime.NumGoroutine()
			after[round] = heapAlloc()
			afterStack := stackInUse()
			t.Logf("round %d: goroutines %d before, %d with %d sessions open, %d after they idled out", round+1, baseG, openG, n, afterG)
			t.Logf("round %d: heap %s before, %s open, %s after; stacks %s, %s, %s", round+1,
				mib(baseHeap), mib(openHeap), mib(after[round]), mib(baseStack), mib(openStack), mib(afterStack))
			if total, _ := r.count("alice"); total != 0 {
				t.Errorf("round %d: %d sessions counted after the idle timeout", round+1, total)
			}
			// runtime.NumGoroutine counts the whole process: a goroutine
			// of another test (a server's connection closing) may come or
			// go meanwhile. A leak is one or more a session, thousands.
			if afterG > baseG+goroutineSlack {
				t.Errorf("round %d: %d goroutines after the sessions idled out, %d before", round+1, afterG, baseG)
			}
			if held := openHeap - baseHeap; after[round] > baseHeap+held/2 {
				t.Errorf("round %d: heap %s after, %s before: most of the sessions' %s was kept", round+1, mib(after[round]), mib(baseHeap), mib(held))
			}
		}
		// A leak keeps about 6 KiB a session (the 17 MiB open): 3 MiB over
		// the first round is half of it; less is the runtime's own noise
		// (0.8 MiB seen between two runs of one binary).
		if after[1] > after[0]+3<<20 {
			t.Errorf("heap %s after the second round, %s after the first: sessions leave memory behind", mib(after[1]), mib(after[0]))
		}
	})
}

// goroutineSlack is how many goroutines outside the test may come and go
// while it counts.
const goroutineSlack = 5

// heapAlloc is the live heap after a collection.
func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// stackInUse is the memory of goroutine stacks.
func stackInUse() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.StackInuse
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// A session whose client declared no elicitation is answered in JSON; one
// that declared it, in an event stream, which carries a card's
// elicitation/create during a call. Each session's requests reach the
// handler that holds it: a ping is answered, a DELETE ends the session.
func TestSessionAnswerFraming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSessionRig(t, Options{})
		tok := token("u_1", time.Hour)
		for _, c := range []struct{ caps, contentType string }{
			{`{}`, "application/json"},
			{`{"roots":{"listChanged":true}}`, "application/json"},
			{`{"elicitation":{}}`, "text/event-stream"},
			{`{"elicitation":{"form":{}}}`, "text/event-stream"},
			{`{"elicitation":null}`, "text/event-stream"},
		} {
			framed := func(w *httptest.ResponseRecorder) bool {
				body := w.Body.String()
				if c.contentType == "application/json" {
					return jsontext.Value(body).IsValid() && strings.HasPrefix(body, `{"jsonrpc":"2.0"`)
				}
				return strings.HasPrefix(body, "event: message\ndata: {")
			}
			w := r.do(r.h, tok, "", strings.Replace(initialize, `"capabilities":{}`, `"capabilities":`+c.caps, 1))
			id := w.Header().Get("Mcp-Session-Id")
			if w.Code != http.StatusOK || id == "" || w.Header().Get("Content-Type") != c.contentType || !framed(w) {
				t.Fatalf("initialize with %s: %d %s %q, session %q", c.caps, w.Code, w.Header().Get("Content-Type"), w.Body, id)
			}
			w = r.do(r.h, tok, id, ping)
			if w.Code != http.StatusOK || w.Header().Get("Content-Type") != c.contentType || !framed(w) || !strings.Contains(w.Body.String(), `"result":{}`) {
				t.Errorf("ping on a session with %s: %d %s %q", c.caps, w.Code, w.Header().Get("Content-Type"), w.Body)
			}
			if w := r.do(r.h, tok, id, ""); w.Code != http.StatusNoContent {
				t.Errorf("DELETE of a session with %s: %d %q", c.caps, w.Code, w.Body)
			}
			synctest.Wait()
			if r.alive(t, tok, id) {
				t.Errorf("the session with %s is open after its DELETE", c.caps)
			}
		}
	})
}
