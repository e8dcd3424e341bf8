package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-json-experiment/json"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/apitest"
	"github.com/toolgate/toolgate/internal/mcp"
)

// mcpRequest is one MCP request to the test server: a POST of body, or a
// DELETE when body is ""; header holds name, value pairs. A chunked body
// is sent without Content-Length.
func mcpRequest(t *testing.T, s *server, body string, chunked bool, header ...string) (*http.Response, string) {
	t.Helper()
	method := http.MethodPost
	if body == "" {
		method = http.MethodDelete
	}
	var r io.Reader = strings.NewReader(body)
	if chunked {
		r = io.MultiReader(r) // hides the length from NewRequest
	}
	req, _ := http.NewRequest(method, s.URL+"/mcp", r)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// mcpSession initializes a 2025-11-25 session with header (a token, say)
// and returns its id.
func mcpSession(t *testing.T, s *server, header ...string) string {
	t.Helper()
	resp, body := mcpRequest(t, s, apitest.MCPInitialize, false, header...)
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	t.Cleanup(func() { mcpRequest(t, s, "", false, append(header, "Mcp-Session-Id", id)...) })
	return id
}

// tooManySessions checks a refusal over a session cap: 429 with
// Retry-After, the JSON error naming the option.
func tooManySessions(t *testing.T, resp *http.Response, body, option string) {
	t.Helper()
	var e apiError
	_ = json.Unmarshal([]byte(body), &e)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != retryAfter ||
		e.Error.Code != "too_many_sessions" || !strings.Contains(e.Error.Message, option) || resp.Header.Get("Mcp-Session-Id") != "" {
		t.Errorf("over %s: %d %v %s, want 429 too_many_sessions naming it", option, resp.StatusCode, resp.Header, body)
	}
}

// The session caps over HTTP, with callers: one caller's sessions over
// max_sessions_per_caller and anyone's over max_sessions are refused as
// the pages' caps are, naming the option.
func TestMCPSessionCapsHTTP(t *testing.T) {
	rec := apitest.NewRecorder(t)
	p := apitest.NewPlatform(t, "k1")
	o := callersOptions(t, rec.URL, p.URL)
	o.api.MCPSessions = mcp.SessionLimits{PerCaller: 2, Total: 3}
	s := startServer(t, o)
	bearer := func(user string) []string {
		return []string{"Authorization", "Bearer " + p.Token(t, "k1", apitest.GoodClaims(user, "user"))}
	}

	mcpSession(t, s, bearer("u_7")...)
	mcpSession(t, s, bearer("u_7")...)
	resp, body := mcpRequest(t, s, apitest.MCPInitialize, false, bearer("u_7")...)
	tooManySessions(t, resp, body, "max_sessions_per_caller")
	mcpSession(t, s, bearer("u_8")...)
	resp, body = mcpRequest(t, s, apitest.MCPInitialize, false, bearer("u_9")...)
	tooManySessions(t, resp, body, "max_sessions")

	// The sessionless revision opens none, and is never refused for it.
	cs := apitest.MCPClient{Endpoint: s.URL + "/mcp", Token: p.Token(t, "k1", apitest.GoodClaims("u_9", "user"))}.Session(t)
	if tools := apitest.ListTools(t, cs); tools["open"] == nil {
		t.Errorf("a sessionless client over the caps lists %v", tools)
	}
}

// A session ends when the caller token it was opened with stops being
// accepted (its exp and the leeway): a new token of the same caller then
// finds it gone (404), unless a request carried one before the end.
func TestMCPSessionTokenExpiryHTTP(t *testing.T) {
	const secret = "caller-secret-0123456789-abcdefghijklmn"
	synctest.Test(t, func(t *testing.T) {
		callers, _, err := NewAuthenticators(&TokenConfig{Secret: secret, Issuer: "https://platform.test", Audience: "toolgate", Leeway: 5 * time.Second}, nil, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		idle := 24 * time.Hour
		api := newTestAPI(t, Config{Callers: callers, MCPSessions: mcp.SessionLimits{IdleTimeout: idle}})
		// A bubble ends once its goroutines have: let the sessions idle out.
		t.Cleanup(func() { time.Sleep(idle + time.Second) })
		tokenFor := func(d time.Duration) string {
			c := apitest.GoodClaims("u_7", "user")
			c["exp"] = time.Now().Add(d).Unix()
			return apitest.SignHS256(t, c, secret)
		}
		post := func(token, id, body string) *httptest.ResponseRecorder {
			req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Authorization", "Bearer "+token)
			if id != "" {
				req.Header.Set("Mcp-Session-Id", id)
				req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			}
			w := httptest.NewRecorder()
			api.ServeHTTP(w, req)
			return w
		}
		first := tokenFor(2 * time.Minute)
		open := func() string {
			w := post(first, "", apitest.MCPInitialize)
			if w.Code != http.StatusOK || w.Header().Get("Mcp-Session-Id") == "" {
				t.Fatalf("initialize: %d %s", w.Code, w.Body)
			}
			return w.Header().Get("Mcp-Session-Id")
		}
		const ping = `{"jsonrpc":"2.0","id":2,"method":"ping"}`
		expiring, renewed := open(), open()

		time.Sleep(time.Minute)
		if w := post(tokenFor(10*time.Minute), renewed, ping); w.Code != http.StatusOK {
			t.Fatalf("ping with a renewed token: %d %s", w.Code, w.Body)
		}
		// Past exp, within the leeway: the token is still accepted, and
		// so is the session.
		time.Sleep(time.Minute + 4*time.Second)
		if w := post(first, expiring, ping); w.Code != http.StatusOK {
			t.Errorf("within the leeway: %d %s", w.Code, w.Body)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if w := post(tokenFor(time.Hour), expiring, ping); w.Code != http.StatusNotFound {
			t.Errorf("a session past its token's end, with a new token: %d %s, want 404", w.Code, w.Body)
		}
		if w := post(tokenFor(time.Hour), renewed, ping); w.Code != http.StatusOK {
			t.Errorf("a session whose token was renewed: %d %s", w.Code, w.Body)
		}
	})
}

// /mcp holds bodies to max_request_size as the Tools API does, with the
// same 413, on the sessionless path and on a session, with and without a
// Content-Length; nothing reaches the upstream, and the session goes on.
func TestMCPMaxRequestSize(t *testing.T) {
	s, rec := startMCPGateway(t) // max_request_size 64KiB
	big := strings.Repeat("x", 70<<10)
	status, want := s.Send(t, http.MethodPost, s.URL+"/tools/save", "application/json", `{"input":{"id":"`+big+`"},`+apitest.Who+`}`)
	if status != http.StatusRequestEntityTooLarge || apitest.ErrCode(want) != "too_large" {
		t.Fatalf("the Tools API over max_request_size: %d %s", status, want)
	}
	const u1 = `"toolgate/identity":{"user":"u_1","install":"in_1"}`
	call := func(meta, args string) string {
		return `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"save","arguments":` + args + `,"_meta":{` + meta + `}}}`
	}
	sessionless := []string{"Mcp-Protocol-Version", "2026-07-28"}
	id := mcpSession(t, s)
	session := []string{"Mcp-Session-Id", id, "Mcp-Protocol-Version", "2025-11-25"}
	before := rec.Count()
	for _, c := range []struct {
		name    string
		body    string
		chunked bool
		header  []string
	}{
		{"sessionless", call(`"io.modelcontextprotocol/protocolVersion":"2026-07-28",`+u1, `{"id":"`+big+`"}`), false, sessionless},
		{"sessionless, chunked", call(`"io.modelcontextprotocol/protocolVersion":"2026-07-28",`+u1, `{"id":"`+big+`"}`), true, sessionless},
		{"session", call(u1, `{"id":"`+big+`"}`), false, session},
		{"session, chunked", call(u1, `{"id":"`+big+`"}`), true, session},
		{"initialize", strings.Replace(apitest.MCPInitialize, `"name":"t"`, `"name":"`+big+`"`, 1), false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := mcpRequest(t, s, c.body, c.chunked, c.header...)
			if resp.StatusCode != http.StatusRequestEntityTooLarge || body != want || resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("%d %s %q, want the Tools API's 413 %s", resp.StatusCode, resp.Header.Get("Content-Type"), body, want)
			}
			if resp.Header.Get("Mcp-Session-Id") != "" {
				t.Error("a refused request opened a session")
			}
		})
	}
	if n := rec.Count() - before; n != 0 {
		t.Errorf("bodies over max_request_size reached the upstream %d times", n)
	}

	// The session is still there, and a call within the limit runs.
	small := strings.Replace(call(u1, `{"id":"b1"}`), `"save"`, `"get_item"`, 1)
	resp, body := mcpRequest(t, s, small, false, session...)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"result"`) || strings.Contains(body, `"isError":true`) || rec.Count() != before+1 {
		t.Errorf("a call within the limit on the session: %d %s, upstream reached %d times", resp.StatusCode, body, rec.Count()-before)
	}
}
