package caddymodule

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/apptools"
	"github.com/toolgate/toolgate/internal/apitest"
	"github.com/toolgate/toolgate/internal/redistest"
)

// answer is short for the tables below.
type answer = apitest.Answer

// These tests put faults between a running gateway and what it stands on
// (the fault table of docs/security.md): an upstream that refuses, hangs, dribbles, cuts
// the connection or answers the wrong thing, a Redis that dies mid-call, a
// config reload while calls and page waits are open. Each call must end with
// a result or a clear error result, and never run twice: the upstream counts
// its executions per call id (the Idempotency-Key toolgate sends).

// faultUpstream answers GET /f/{kind} with the fault of that kind and counts
// every request it read, per Idempotency-Key.
type faultUpstream struct {
	srv     *httptest.Server
	mu      sync.Mutex
	runs    map[string]int
	held    chan string // the key of each /f/hold as it arrives
	release chan struct{}
}

func newFaultUpstream(t *testing.T) *faultUpstream {
	u := &faultUpstream{runs: map[string]int{}, held: make(chan string, 16), release: make(chan struct{})}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(func() {
		u.releaseHeld()
		u.srv.Close()
	})
	return u
}

func (u *faultUpstream) releaseHeld() {
	u.mu.Lock()
	defer u.mu.Unlock()
	select {
	case <-u.release:
	default:
		close(u.release)
	}
}

// count is how many times the upstream ran the call with this id, by u_1
// in in_1 (apitest.Who).
func (u *faultUpstream) count(callID string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.runs[apptools.IdempotencyKey("u_1", "in_1", callID)]
}

// dribble writes body one byte at a time, every gap.
func dribble(w http.ResponseWriter, r *http.Request, body string, gap time.Duration) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(http.StatusOK)
	for i := range len(body) {
		if _, err := io.WriteString(w, body[i:i+1]); err != nil {
			return
		}
		http.NewResponseController(w).Flush()
		select {
		case <-time.After(gap):
		case <-r.Context().Done():
			return
		}
	}
}

// hijack takes the connection and writes raw bytes on it, then closes it.
func hijack(w http.ResponseWriter, raw string) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	buf.WriteString(raw)
	buf.Flush()
	conn.Close()
}

func (u *faultUpstream) serve(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	u.mu.Lock()
	u.runs[key]++
	u.mu.Unlock()
	kind := strings.TrimPrefix(r.URL.Path, "/f/")
	answer := func(status int, contentType, body string) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
	switch kind {
	case "ok":
		answer(200, "application/json", `{"content":"ok"}`)
	case "hold":
		u.held <- key
		select {
		case <-u.release:
			answer(200, "application/json", `{"content":"held"}`)
		case <-r.Context().Done():
		}
	case "hang":
		<-r.Context().Done()
	case "dribble_slow":
		dribble(w, r, `{"content":"too slow to arrive"}`, 100*time.Millisecond)
	case "dribble_fast":
		dribble(w, r, `{"content":"dribbled"}`, 5*time.Millisecond)
	case "drop":
		// Read the request, run it, and go away without a word.
		hijack(w, "")
	case "cut":
		hijack(w, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"content\":\"par")
	case "cut_chunked":
		hijack(w, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n20\r\n{\"content\":\"par")
	case "cut_headers":
		hijack(w, "HTTP/1.1 200 OK\r\nContent-Ty")
	case "status500":
		answer(500, "text/plain", "boom")
	case "json_as_png":
		answer(200, "image/png", `{"content":"not json to us"}`)
	case "html":
		answer(200, "text/html; charset=utf-8", `<p>hi & bye</p>`)
	case "png":
		answer(200, "image/png", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe")
	case "bad_utf8_text":
		answer(200, "text/plain", "caf\xe9 cr\xe8me")
	case "bad_utf8_json":
		answer(200, "application/json", `{"content":"caf`+"\xe9"+`","markdown":"**`+"\xff"+`**"}`)
	case "bad_utf8_error":
		answer(502, "application/json", `{"code":"e`+"\xff"+`","error":"down `+"\xe9"+`"}`)
	case "bad_utf8_500_text":
		answer(500, "text/plain", "d\xe9j\xe0 vu")
	default:
		answer(404, "text/plain", "no fault "+kind)
	}
}

// faultsConfig serves one tool per fault over the upstream, a tool on a
// component nothing listens on, a client tool, and the ledger given.
func faultsConfig(dir, upstream, ledger, timeout string, extra ...string) string {
	return testGlobals(dir) + fmt.Sprintf(`http://127.0.0.1:9080 {
	bind 127.0.0.1
	handle_path /toolgate/* {
		toolgate {
			component api %[1]s
			component down %[2]s
			pages {
				secret %[5]s
				issuer https://app.test
				audience toolgate-pages
			}
			client_tool_timeout 20s
			ledger %[3]s
			upstream_timeout %[4]s
			tool fault {
				description "Answers with a fault."
				input_schema `+"`"+`{"type":"object","properties":{"kind":{"type":"string"}},"required":["kind"],"additionalProperties":false}`+"`"+`
				target app api GET /f/${input.kind}
			}
			tool refused {
				description "Nothing listens there."
				input_schema %[6]s
				target app down GET /x
			}
			tool where {
				description "Where the video is."
				input_schema %[6]s
				target kazzle video_position
			}
			%[7]s
		}
	}
}
`, upstream, closedURL(), ledger, timeout, apitest.PageSecret, emptySchema, strings.Join(extra, "\n"))
}

// closedURL is the URL of a loopback port nothing listens on.
func closedURL() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// rawInvoke invokes a tool and returns the status and the answer's bytes.
func rawInvoke(t *testing.T, tc *caddytest.Tester, tool, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/tools/"+tool, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := tc.Client.Do(req)
	if err != nil {
		t.Fatalf("invoke %s: %v", tool, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("invoke %s: reading the answer: %v", tool, err)
	}
	return resp.StatusCode, raw
}

// decode reads an answer, which must be valid JSON in valid UTF-8.
func decode(t *testing.T, raw []byte) answer {
	t.Helper()
	if !utf8.Valid(raw) {
		t.Errorf("the answer is not valid UTF-8: %q", raw)
	}
	var a answer
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("the answer is not JSON: %q", raw)
	}
	return a
}

func TestFaultsUpstream(t *testing.T) {
	up := newFaultUpstream(t)
	tc := caddytest.NewTester(t)
	dir := dataDir(t)
	initServer(tc, faultsConfig(dir, up.srv.URL, "bolt "+dir+"/ledger.db", "1s"))

	for i, c := range []struct {
		kind string
		// want checks the first answer.
		want func(a answer) bool
		runs int
	}{
		{"refused", func(a answer) bool { return a.IsError && strings.Contains(a.Content, "could not be reached") }, 0},
		{"hang", func(a answer) bool { return a.IsError && strings.Contains(a.Content, "did not answer within 1s") }, 1},
		{"dribble_slow", func(a answer) bool { return a.IsError && strings.Contains(a.Content, "did not answer within 1s") }, 1},
		{"dribble_fast", func(a answer) bool { return !a.IsError && a.Content == "dribbled" }, 1},
		{"drop", func(a answer) bool { return a.IsError && strings.Contains(a.Content, "before an answer arrived") }, 1},
		{"cut", func(a answer) bool { return a.IsError && strings.Contains(a.Content, "broke while reading the answer") }, 1},
		{"cut_chunked", func(a answer) bool { return a.IsError && strings.Contains(a.Content, "broke while reading the answer") }, 1},
		{"cut_headers", func(a answer) bool { return a.IsError && strings.Contains(a.Content, "before an answer arrived") }, 1},
		{"status500", func(a answer) bool {
			return a.IsError && a.Content == "handler answered 500 Internal Server Error: boom"
		}, 1},
		// A type that is not JSON makes the body the content (docs/http-api.md,
		// "What a component receives").
		{"json_as_png", func(a answer) bool { return !a.IsError && a.Content == `{"content":"not json to us"}` }, 1},
		{"html", func(a answer) bool { return !a.IsError && a.Content == `<p>hi & bye</p>` }, 1},
		{"png", func(a answer) bool { return a.IsError && strings.Contains(a.Content, "not UTF-8 text") }, 1},
		{"bad_utf8_text", func(a answer) bool { return a.IsError && strings.Contains(a.Content, "not UTF-8 text") }, 1},
		{"bad_utf8_json", func(a answer) bool { return !a.IsError && a.Content == "caf\uFFFD" && a.Markdown == "**\uFFFD**" }, 1},
		{"bad_utf8_error", func(a answer) bool {
			return a.IsError && a.Content == "handler answered 502 Bad Gateway: e\uFFFD: down \uFFFD"
		}, 1},
		{"bad_utf8_500_text", func(a answer) bool { return a.IsError && a.Content == "handler answered 500 Internal Server Error" }, 1},
	} {
		t.Run(c.kind, func(t *testing.T) {
			// A call just before puts an idle connection in the pool, so
			// the fault meets a reused one, as it would under load.
			if _, raw := rawInvoke(t, tc, "fault", fmt.Sprintf(`{"input":{"kind":"ok"},"callId":"warm_%d",%s}`, i, apitest.Who)); decode(t, raw).Content != "ok" {
				t.Fatalf("warm-up: %s", raw)
			}
			tool, input := "fault", `{"kind":"`+c.kind+`"}`
			if c.kind == "refused" {
				tool, input = "refused", `{}`
			}
			id := "f_" + c.kind
			body := `{"input":` + input + `,"callId":"` + id + `",` + apitest.Who + `}`
			status, first := rawInvoke(t, tc, tool, body)
			a := decode(t, first)
			if status != 200 || a.Status != "done" || !c.want(a) {
				t.Errorf("answer %d %s", status, first)
			}
			status, again := rawInvoke(t, tc, tool, body)
			if status != 200 || !bytes.Equal(again, first) {
				t.Errorf("repeat: %d %s, want the recorded %s", status, again, first)
			}
			if status, g := client(tc).GetCall(t, "/calls/"+id+"?user=u_1&install=in_1"); status != 200 || g != a {
				t.Errorf("GET /calls: %d %+v, want %+v", status, g, a)
			}
			if n := up.count(id); n != c.runs {
				t.Errorf("the upstream ran %s %d times, want %d", id, n, c.runs)
			}
		})
	}
}

// longClient waits longer than caddytest's client (5s), for calls held
// across a fault.
var longClient = &http.Client{Timeout: 30 * time.Second}

// asyncInvoke invokes a tool in the background.
func asyncInvoke(t *testing.T, tool, body string) <-chan []byte {
	ch := make(chan []byte, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, base+"/tools/"+tool, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := longClient.Do(req)
		if err != nil {
			msg, _ := json.Marshal(err.Error())
			ch <- []byte(`{"error":{"code":"test","message":` + string(msg) + `}}`)
			return
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		ch <- raw
	}()
	return ch
}

// within receives from ch, or fails the test after d.
func within[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("%s: nothing within %s", what, d)
	}
	var zero T
	return zero
}

// TestFaultsRedisDiesMidCall kills Redis while the upstream holds a call and
// starts it again on the same data (appendonly, fsync always: a Redis that
// forgets acknowledged writes forgets calls, and nothing can keep a call id
// from running again then). While it is down, new calls are refused with
// 503 and reach nothing. The held call answers its result when the upstream
// does, and is recorded once Redis returns: a retry and GET /calls give that
// same result, and the upstream ran it once.
func TestFaultsRedisDiesMidCall(t *testing.T) {
	rs := redistest.StartPersistent(t)
	up := newFaultUpstream(t)
	tc := caddytest.NewTester(t)
	initServer(tc, faultsConfig(dataDir(t), up.srv.URL, "redis "+rs.Addr, "20s"))

	held := `{"input":{"kind":"hold"},"callId":"rd_1",` + apitest.Who + `}`
	first := asyncInvoke(t, "fault", held)
	if key := within(t, up.held, 10*time.Second, "the held call"); key != apptools.IdempotencyKey("u_1", "in_1", "rd_1") {
		t.Fatalf("held call %q", key)
	}
	rs.Stop()

	status, raw := rawInvoke(t, tc, "fault", `{"input":{"kind":"ok"},"callId":"rd_2",`+apitest.Who+`}`)
	if a := decode(t, raw); status != 503 || a.Error == nil || a.Error.Code != "unavailable" {
		t.Errorf("a call while Redis is down: %d %s, want 503 unavailable", status, raw)
	}
	if n := up.count("rd_2"); n != 0 {
		t.Errorf("a call while Redis is down reached the upstream %d times", n)
	}
	if status, _ := client(tc).GetCall(t, "/calls/rd_1?user=u_1&install=in_1"); status != 503 {
		t.Errorf("GET /calls while Redis is down: %d, want 503", status)
	}

	// The upstream answers while Redis is still down.
	up.releaseHeld()
	raw = within(t, first, 15*time.Second, "the held call's answer")
	if a := decode(t, raw); a.Status != "done" || a.IsError || a.Content != "held" {
		t.Fatalf("the held call answered %s, want its result", raw)
	}

	rs.Restart(t)
	retried := asyncInvoke(t, "fault", held)
	again := within(t, retried, 15*time.Second, "the retry after Redis returned")
	if !bytes.Equal(again, raw) {
		t.Errorf("the retry after Redis returned: %s, want the first answer %s", again, raw)
	}
	if status, g := client(tc).GetCall(t, "/calls/rd_1?user=u_1&install=in_1"); status != 200 || g.Status != "done" || g.Content != "held" {
		t.Errorf("GET /calls after Redis returned: %d %+v", status, g)
	}
	if n := up.count("rd_1"); n != 1 {
		t.Errorf("the upstream ran rd_1 %d times, want once", n)
	}
	// The call refused while Redis was down was never recorded: it runs now.
	if status, raw := rawInvoke(t, tc, "fault", `{"input":{"kind":"ok"},"callId":"rd_2",`+apitest.Who+`}`); status != 200 || decode(t, raw).Content != "ok" || up.count("rd_2") != 1 {
		t.Errorf("the refused call after Redis returned: %d %s, ran %d times", status, raw, up.count("rd_2"))
	}
}

// TestFaultsReload loads a changed config (POST /load to the admin API)
// while the upstream holds a call and while a client tool call waits for its
// page. Both end normally after the reload: the held call's result is
// recorded and returned, the page claims and answers its call through the
// new config, and a repeat of either gets the recorded answer.
func TestFaultsReload(t *testing.T) {
	up := newFaultUpstream(t)
	dir := dataDir(t)
	ledger := "bolt " + dir + "/ledger.db"
	tc := caddytest.NewTester(t)
	initServer(tc, faultsConfig(dir, up.srv.URL, ledger, "20s"))
	tok := apitest.PageToken(t, "u_1", "th_1")
	page, status, msg := apitest.OpenStream(t, base, tok, "th_1")
	if page == nil {
		t.Fatalf("stream: %d %s", status, msg)
	}

	heldBody := `{"input":{"kind":"hold"},"callId":"rl_1",` + apitest.Who + `}`
	held := asyncInvoke(t, "fault", heldBody)
	within(t, up.held, 10*time.Second, "the held call")
	pageBody := `{"input":{},"callId":"rl_2",` + apitest.ThreadCtx + `,` + apitest.PageIdentity + `}`
	waiting := asyncInvoke(t, "where", pageBody)
	if o := page.Next(t); o.CallID != "rl_2" {
		t.Fatalf("the page was offered %+v", o)
	}

	initServer(tc, faultsConfig(dir, up.srv.URL, ledger, "20s", `tool added {
				description "Added by the reload."
				input_schema `+emptySchema+`
				target app api GET /f/ok
			}`))
	if status, raw := rawInvoke(t, tc, "added", `{"input":{},"callId":"rl_3",`+apitest.Who+`}`); status != 200 || decode(t, raw).Content != "ok" {
		t.Fatalf("the reloaded config does not serve: %d %s", status, raw)
	}

	if status, body := client(tc).Claim(t, tok, "rl_2"); status != 200 {
		t.Fatalf("claim after the reload: %d %s", status, body)
	}
	if status, body := client(tc).PostResult(t, tok, "rl_2", `{"result":"at 83s"}`); status != 200 {
		t.Fatalf("result after the reload: %d %s", status, body)
	}
	pageRaw := within(t, waiting, 10*time.Second, "the client tool call")
	if a := decode(t, pageRaw); a.Status != "done" || a.IsError || a.Content != "at 83s" {
		t.Errorf("the client tool call across the reload: %s", pageRaw)
	}

	up.releaseHeld()
	heldRaw := within(t, held, 10*time.Second, "the held call")
	if a := decode(t, heldRaw); a.Status != "done" || a.IsError || a.Content != "held" {
		t.Errorf("the held call across the reload: %s", heldRaw)
	}

	for _, c := range []struct {
		tool, body string
		want       []byte
	}{{"fault", heldBody, heldRaw}, {"where", pageBody, pageRaw}} {
		if status, raw := rawInvoke(t, tc, c.tool, c.body); status != 200 || !bytes.Equal(raw, c.want) {
			t.Errorf("repeat of %s after the reload: %d %s, want %s", c.tool, status, raw, c.want)
		}
	}
	if status, body := client(tc).Claim(t, tok, "rl_2"); status != 409 {
		t.Errorf("a second claim: %d %s, want 409", status, body)
	}
	if n := up.count("rl_1"); n != 1 {
		t.Errorf("the upstream ran the held call %d times, want once", n)
	}
}
