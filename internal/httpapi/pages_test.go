package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/clienttools"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/web"
)

const (
	pageSecret   = "page-secret-0123456789-abcdefghij-klmnop"
	pageOrigin   = "http://localhost:9090"
	threadCtx    = `"context":{"source":"thread","threadId":"th_1"}`
	pageIdentity = `"identity":{"user":"u_1"}`
)

// pagesOptions is the pages config of the module's tests: page tokens
// signed with pageSecret (issuer https://app.test, audience
// toolgate-pages), one more page origin, client_tool_timeout 2s, a bolt
// ledger, and one client tool.
func pagesOptions(t *testing.T) options {
	t.Helper()
	_, pages, err := NewAuthenticators(nil, &TokenConfig{Secret: pageSecret, Issuer: "https://app.test", Audience: "toolgate-pages"}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	return options{
		sources: []manifest.Source{{Name: "inline tools", Tools: parseTools(t, `{"tools":[
{"name":"where","description":"Where the video is.","input_schema":{"type":"object","properties":{"q":{"type":"string"}}},"target":{"type":"kazzle","name":"video_position"}}]}`)}},
		clientTimeout: 2 * time.Second,
		api:           Config{Pages: pages, PageOrigins: []string{pageOrigin}},
	}
}

func startPages(t *testing.T) *server {
	return startServer(t, pagesOptions(t))
}

// pageClaims are a valid page token's claims for a user and thread.
func pageClaims(user, thread string) jwt.MapClaims {
	return jwt.MapClaims{
		"sub": user, "thread": thread,
		"iss": "https://app.test", "aud": "toolgate-pages",
		"exp": time.Now().Add(5 * time.Minute).Unix(),
	}
}

func signPage(t *testing.T, claims jwt.MapClaims, secret string) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func pageToken(t *testing.T, user, thread string) string {
	return signPage(t, pageClaims(user, thread), pageSecret)
}

// pageStream is a Go "page" reading its thread's client calls.
type pageStream struct {
	offers chan clienttools.Offer
	raw    chan string
	cancel context.CancelFunc
	closed chan struct{}
}

// streamClient has no timeout: a stream stays open until it is cancelled.
var streamClient = &http.Client{Transport: &http.Transport{}}

// openStream opens GET /client/calls; it returns nil and the status and
// body when the answer is not a stream. Once it returns, the server has
// registered the stream.
func openStream(t *testing.T, s *server, token, threadID string, header ...string) (*pageStream, int, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/client/calls?threadId="+threadID, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := streamClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET /client/calls: %v", err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return nil, resp.StatusCode, string(body)
	}
	ps := &pageStream{offers: make(chan clienttools.Offer, 16), raw: make(chan string, 16), cancel: cancel, closed: make(chan struct{})}
	t.Cleanup(cancel)
	go func() {
		defer close(ps.closed)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				event = ""
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "call":
				data := strings.TrimPrefix(line, "data: ")
				var o clienttools.Offer
				if err := json.Unmarshal([]byte(data), &o); err != nil {
					o.CallID = "unparsable: " + data
				}
				ps.raw <- data
				ps.offers <- o
			}
		}
	}()
	return ps, resp.StatusCode, ""
}

func (s *pageStream) next(t *testing.T) clienttools.Offer {
	t.Helper()
	select {
	case o := <-s.offers:
		<-s.raw
		return o
	case <-time.After(5 * time.Second):
		t.Fatal("the page got no call")
	}
	return clienttools.Offer{}
}

// none checks the stream gets no call for a while.
func (s *pageStream) none(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case o := <-s.offers:
		t.Errorf("unexpected call offered: %+v", o)
	case <-time.After(d):
	}
}

func (s *pageStream) close() {
	s.cancel()
	<-s.closed
}

type invokeResult struct {
	status int
	a      answer
	raw    string
	err    error
}

// invokeAsync invokes a tool in the background, as a runtime waiting on
// a client tool does.
func invokeAsync(s *server, tool, body string) <-chan invokeResult {
	ch := make(chan invokeResult, 1)
	go func() {
		var r invokeResult
		defer func() { ch <- r }()
		req, _ := http.NewRequest(http.MethodPost, s.URL+"/tools/"+tool, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := s.client.Do(req)
		if err != nil {
			r.err = err
			return
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		r.status, r.raw = resp.StatusCode, string(raw)
		r.err = json.Unmarshal(raw, &r.a)
	}()
	return ch
}

func waitInvoke(t *testing.T, ch <-chan invokeResult) invokeResult {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("invoke: %v (%s)", r.err, r.raw)
		}
		return r
	case <-time.After(6 * time.Second):
		t.Fatal("the invoke did not answer")
	}
	return invokeResult{}
}

// pending checks an invoke has not answered yet.
func pending(t *testing.T, ch <-chan invokeResult) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("the invoke answered before the page: %d %s", r.status, r.raw)
	default:
	}
}

// pagePost posts to a page endpoint: /client/calls/{id}/claim or /result.
func pagePost(t *testing.T, s *server, token, path, body string, header ...string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.URL+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw), resp.Header
}

func claim(t *testing.T, s *server, token, id string) (int, string) {
	t.Helper()
	status, body, _ := pagePost(t, s, token, "/client/calls/"+id+"/claim", "")
	return status, body
}

func postResult(t *testing.T, s *server, token, id, body string) (int, string) {
	t.Helper()
	status, raw, _ := pagePost(t, s, token, "/client/calls/"+id+"/result", body)
	return status, raw
}

func getCall(t *testing.T, s *server, path string) (int, answer) {
	t.Helper()
	resp, err := s.client.Get(s.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("GET %s: %s", path, raw)
	}
	return resp.StatusCode, a
}

func TestClientToolFlow(t *testing.T) {
	s := startPages(t)
	tok := pageToken(t, "u_1", "th_1")
	page, status, body := openStream(t, s, tok, "th_1")
	if page == nil {
		t.Fatalf("stream: %d %s", status, body)
	}

	inv := invokeAsync(s, "where", `{"input":{ "q": "pos" },"callId":"ct_1",`+threadCtx+`,`+pageIdentity+`}`)
	var raw string
	select {
	case raw = <-page.raw:
	case <-time.After(5 * time.Second):
		t.Fatal("the page got no call")
	}
	o := <-page.offers
	if raw != `{"callId":"ct_1","name":"video_position","input":{"q":"pos"}}` {
		t.Errorf("event data %s", raw)
	}
	if o.CallID != "ct_1" || o.Name != "video_position" || string(o.Input) != `{"q":"pos"}` {
		t.Errorf("offer %+v", o)
	}
	pending(t, inv)
	if status, a := getCall(t, s, "/calls/ct_1?user=u_1"); status != 200 || a.Status != "awaiting_client" || a.Content != "" {
		t.Errorf("GET while waiting: %d %+v", status, a)
	}

	if status, body := claim(t, s, tok, "ct_1"); status != 200 || body != `{"ok":true}` {
		t.Fatalf("claim: %d %s", status, body)
	}
	pending(t, inv)
	if status, body := postResult(t, s, tok, "ct_1", `{"result": {"positionSeconds": 83, "title": "L3"}}`); status != 200 {
		t.Fatalf("result: %d %s", status, body)
	}
	r := waitInvoke(t, inv)
	want := `{"positionSeconds":83,"title":"L3"}`
	if r.status != 200 || r.a.Status != "done" || r.a.IsError || r.a.Content != want || r.a.CallID != "ct_1" || r.a.Tool != "where" {
		t.Fatalf("invoke: %d %s", r.status, r.raw)
	}

	if status, body := postResult(t, s, tok, "ct_1", `{"result":"again"}`); status != 409 || errCode(body) != "conflict" {
		t.Errorf("second result: %d %s", status, body)
	}
	if status, body := claim(t, s, tok, "ct_1"); status != 409 || errCode(body) != "conflict" {
		t.Errorf("claim after the result: %d %s", status, body)
	}
	if status, a := getCall(t, s, "/calls/ct_1?user=u_1"); status != 200 || a.Status != "done" || a.Content != want || a.IsError {
		t.Errorf("GET /calls: %d %+v", status, a)
	}

	// A repeat of the call id gets the recorded result; no page is asked.
	again := waitInvoke(t, invokeAsync(s, "where", `{"input":{"q":"pos"},"callId":"ct_1",`+threadCtx+`,`+pageIdentity+`}`))
	if again.status != 200 || again.raw != r.raw {
		t.Errorf("repeat: %d %s, want %s", again.status, again.raw, r.raw)
	}
	page.none(t, 200*time.Millisecond)
	page2, _, _ := openStream(t, s, tok, "th_1")
	page2.none(t, 100*time.Millisecond)
}

// answerPage opens a stream, invokes where, and answers the call with body.
func answerPage(t *testing.T, s *server, callID, body string) invokeResult {
	t.Helper()
	tok := pageToken(t, "u_1", "th_1")
	page, status, msg := openStream(t, s, tok, "th_1")
	if page == nil {
		t.Fatalf("stream: %d %s", status, msg)
	}
	defer page.close()
	inv := invokeAsync(s, "where", `{"input":{},"callId":"`+callID+`",`+threadCtx+`,`+pageIdentity+`}`)
	o := page.next(t)
	if o.CallID != callID || string(o.Input) != `{}` {
		t.Errorf("offer %+v", o)
	}
	if status, msg := claim(t, s, tok, callID); status != 200 {
		t.Fatalf("claim: %d %s", status, msg)
	}
	if status, msg := postResult(t, s, tok, callID, body); status != 200 {
		t.Fatalf("result %s: %d %s", body, status, msg)
	}
	return waitInvoke(t, inv)
}

func TestClientToolResults(t *testing.T) {
	s := startPages(t)
	for i, c := range []struct {
		body    string
		content string
		isError bool
	}{
		{`{"result":"at 1:23 <b>"}`, "at 1:23 <b>", false},
		{`{}`, "", false},
		{`{"result":null}`, "null", false},
		{`{"result":[1, {"b":true,"a":"x"}]}`, `[1,{"b":true,"a":"x"}]`, false},
		{`{"error":"boom"}`, "boom", true},
	} {
		r := answerPage(t, s, fmt.Sprintf("res_%d", i), c.body)
		if r.status != 200 || r.a.Status != "done" || r.a.Content != c.content || r.a.IsError != c.isError {
			t.Errorf("%s: %d %s, want content %q isError %v", c.body, r.status, r.raw, c.content, c.isError)
		}
	}

	// A malformed result is refused and the call still waits for a good one.
	tok := pageToken(t, "u_1", "th_1")
	page, _, _ := openStream(t, s, tok, "th_1")
	inv := invokeAsync(s, "where", `{"callId":"res_bad",`+threadCtx+`,`+pageIdentity+`}`)
	page.next(t)
	for _, bad := range []string{`{"result":1,"other":2}`, `{"result":`, `[]`, `{"result":1} {}`} {
		if status, body := postResult(t, s, tok, "res_bad", bad); status != 400 {
			t.Errorf("result %s: %d %s", bad, status, body)
		}
	}
	pending(t, inv)
	if status, body := postResult(t, s, tok, "res_bad", `{"result":7}`); status != 200 {
		t.Fatalf("result: %d %s", status, body)
	}
	if r := waitInvoke(t, inv); r.a.Content != "7" || r.a.IsError {
		t.Errorf("after malformed results: %s", r.raw)
	}
}

func TestClientToolTimeout(t *testing.T) {
	s := startPages(t)
	tok := pageToken(t, "u_1", "th_1")
	begin := time.Now()
	r := waitInvoke(t, invokeAsync(s, "where", `{"input":{},"callId":"late_1",`+threadCtx+`,`+pageIdentity+`}`))
	if r.status != 200 || r.a.Status != "done" || !r.a.IsError || r.a.Content != "client tool timed out" {
		t.Fatalf("invoke with no page: %d %s", r.status, r.raw)
	}
	if d := time.Since(begin); d < 2*time.Second || d > 2900*time.Millisecond {
		t.Errorf("answered after %v, want the 2s client_tool_timeout", d)
	}
	if status, body := claim(t, s, tok, "late_1"); status != 409 {
		t.Errorf("late claim: %d %s", status, body)
	}
	if status, body := postResult(t, s, tok, "late_1", `{"result":"late"}`); status != 409 {
		t.Errorf("late result: %d %s", status, body)
	}
	// A page opening now is not offered the call.
	page, _, _ := openStream(t, s, tok, "th_1")
	page.none(t, 100*time.Millisecond)
	if status, a := getCall(t, s, "/calls/late_1?user=u_1"); status != 200 || a.Content != "client tool timed out" || !a.IsError {
		t.Errorf("GET /calls: %d %+v", status, a)
	}
}

func TestClientToolNeedsThread(t *testing.T) {
	s := startPages(t)
	page, _, _ := openStream(t, s, pageToken(t, "u_1", "th_1"), "th_1")
	for _, ctx := range []string{``, `"context":{"source":"api"},`} {
		r := waitInvoke(t, invokeAsync(s, "where", `{"input":{},`+ctx+pageIdentity+`}`))
		if r.status != 200 || r.a.Status != "done" || !r.a.IsError || r.a.Content != "client tools need a thread" {
			t.Errorf("api call %q: %d %s", ctx, r.status, r.raw)
		}
	}
	page.none(t, 100*time.Millisecond)
}

func TestPageAuth(t *testing.T) {
	s := startPages(t)

	if ps, status, body := openStream(t, s, "", "th_1"); ps != nil || status != 401 || errCode(body) != "unauthorized" {
		t.Errorf("no token: %d %s", status, body)
	}
	expired := pageClaims("u_1", "th_1")
	expired["exp"] = time.Now().Add(-time.Hour).Unix()
	otherIss := pageClaims("u_1", "th_1")
	otherIss["iss"] = "https://evil.test"
	otherAud := pageClaims("u_1", "th_1")
	otherAud["aud"] = "someone-else"
	noThread := pageClaims("u_1", "th_1")
	delete(noThread, "thread")
	noSub := pageClaims("u_1", "th_1")
	delete(noSub, "sub")
	noExp := pageClaims("u_1", "th_1")
	delete(noExp, "exp")
	numThread := pageClaims("u_1", "th_1")
	numThread["thread"] = 1
	for name, tok := range map[string]string{
		"bad signature": signPage(t, pageClaims("u_1", "th_1"), pageSecret+"-not"),
		"garbage":       "not.a.token",
		"expired":       signPage(t, expired, pageSecret),
		"other issuer":  signPage(t, otherIss, pageSecret),
		"other aud":     signPage(t, otherAud, pageSecret),
		"no thread":     signPage(t, noThread, pageSecret),
		"no sub":        signPage(t, noSub, pageSecret),
		"no exp":        signPage(t, noExp, pageSecret),
		"number thread": signPage(t, numThread, pageSecret),
		"none alg": func() string {
			s, _ := jwt.NewWithClaims(jwt.SigningMethodNone, pageClaims("u_1", "th_1")).SignedString(jwt.UnsafeAllowNoneSignatureType)
			return s
		}(),
	} {
		if ps, status, body := openStream(t, s, tok, "th_1"); ps != nil || status != 401 || errCode(body) != "invalid_token" {
			t.Errorf("%s: stream %d %s", name, status, body)
		}
		if status, body := claim(t, s, tok, "x"); status != 401 {
			t.Errorf("%s: claim %d %s", name, status, body)
		}
	}
	if status, body := claim(t, s, "", "x"); status != 401 {
		t.Errorf("claim without a token: %d %s", status, body)
	}
	if status, body, _ := pagePost(t, s, "", "/client/calls/x/claim", "", "Authorization", "Basic dTpw"); status != 401 {
		t.Errorf("claim with basic auth: %d %s", status, body)
	}

	th1 := pageToken(t, "u_1", "th_1")
	th2 := pageToken(t, "u_1", "th_2")
	other := pageToken(t, "u_2", "th_1")
	if ps, status, body := openStream(t, s, th2, "th_1"); ps != nil || status != 404 {
		t.Errorf("th_2's token reading th_1: %d %s", status, body)
	}
	if ps, status, body := openStream(t, s, th1, ""); ps != nil || status != 404 {
		t.Errorf("no threadId: %d %s", status, body)
	}

	// A call of th_1: only u_1's th_1 page may claim and answer it.
	page, _, _ := openStream(t, s, th1, "th_1")
	otherPage, _, _ := openStream(t, s, other, "th_1")
	th2Page, _, _ := openStream(t, s, th2, "th_2")
	inv := invokeAsync(s, "where", `{"input":{},"callId":"auth_1",`+threadCtx+`,`+pageIdentity+`}`)
	page.next(t)
	otherPage.none(t, 100*time.Millisecond)
	th2Page.none(t, 10*time.Millisecond)
	for name, tok := range map[string]string{"another thread": th2, "another user": other} {
		if status, body := claim(t, s, tok, "auth_1"); status != 404 || errCode(body) != "unknown_call" {
			t.Errorf("%s claims: %d %s", name, status, body)
		}
		if status, body := postResult(t, s, tok, "auth_1", `{"result":"stolen"}`); status != 404 {
			t.Errorf("%s posts: %d %s", name, status, body)
		}
	}
	if status, body := claim(t, s, th1, "auth_1"); status != 200 {
		t.Fatalf("the thread's page claims: %d %s", status, body)
	}
	if status, body := postResult(t, s, th1, "auth_1", `{"result":"mine"}`); status != 200 {
		t.Fatalf("the thread's page posts: %d %s", status, body)
	}
	if r := waitInvoke(t, inv); r.a.Content != "mine" {
		t.Errorf("invoke: %s", r.raw)
	}

	// Wrong methods and paths.
	for _, c := range []struct{ method, path string }{
		{"GET", "/client/calls/auth_1/claim"},
		{"POST", "/client/calls?threadId=th_1"},
	} {
		req, _ := http.NewRequest(c.method, s.URL+c.path, nil)
		req.Header.Set("Authorization", "Bearer "+th1)
		resp, err := s.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 405 {
			t.Errorf("%s %s: %d", c.method, c.path, resp.StatusCode)
		}
	}
	for _, p := range []string{"/client/calls/auth_1/other", "/client/calls/auth_1", "/client/x", "/client/calls//claim", "/client/calls/a/b/claim"} {
		if status, body, _ := pagePost(t, s, th1, p, ""); status != 404 {
			t.Errorf("POST %s: %d %s", p, status, body)
		}
	}
}

func TestClaimLapseHTTP(t *testing.T) {
	s := startPages(t)
	tok := pageToken(t, "u_1", "th_1")
	a, _, _ := openStream(t, s, tok, "th_1")
	inv := invokeAsync(s, "where", `{"input":{"q":"lapse"},"callId":"lapse_1",`+threadCtx+`,`+pageIdentity+`}`)
	if o := a.next(t); o.CallID != "lapse_1" {
		t.Fatalf("A got %+v", o)
	}
	if status, body := claim(t, s, tok, "lapse_1"); status != 200 {
		t.Fatalf("A claims: %d %s", status, body)
	}
	// A goes away without a result, e.g. the tab reloads.
	a.close()

	// B connects and is offered the call again. The server notices A's
	// disconnect shortly after the client does: until it has, B is not the
	// thread's only stream and the claim holds, so B reconnects.
	var offer clienttools.Offer
	for i := 0; ; i++ {
		if i == 50 {
			t.Fatal("the call is never offered again after A left")
		}
		b, status, body := openStream(t, s, tok, "th_1")
		if b == nil {
			t.Fatalf("B: %d %s", status, body)
		}
		select {
		case offer = <-b.offers:
		case <-time.After(100 * time.Millisecond):
			b.close()
			continue
		}
		if offer.CallID != "lapse_1" || string(offer.Input) != `{"q":"lapse"}` {
			t.Fatalf("B got %+v", offer)
		}
		if status, body := claim(t, s, tok, "lapse_1"); status != 200 {
			t.Fatalf("B claims: %d %s", status, body)
		}
		pending(t, inv)
		if status, body := postResult(t, s, tok, "lapse_1", `{"result":"from B"}`); status != 200 {
			t.Fatalf("B posts: %d %s", status, body)
		}
		break
	}
	if r := waitInvoke(t, inv); r.a.Content != "from B" || r.a.IsError {
		t.Errorf("invoke: %s", r.raw)
	}
}

func TestPagesCORS(t *testing.T) {
	s := startPages(t)
	do := func(method, path, origin string, header ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, s.URL+path, nil)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := s.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}

	resp := do("OPTIONS", "/client/calls/x/claim", pageOrigin, "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization,content-type")
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != pageOrigin ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Authorization") ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "POST") {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	if !strings.Contains(strings.Join(resp.Header.Values("Vary"), ","), "Origin") {
		t.Errorf("preflight Vary %v", resp.Header.Values("Vary"))
	}
	resp = do("OPTIONS", "/client/calls?threadId=th_1", pageOrigin, "Access-Control-Request-Method", "GET")
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != pageOrigin {
		t.Errorf("stream preflight: %d %v", resp.StatusCode, resp.Header)
	}

	resp = do("GET", "/client.js", pageOrigin)
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != pageOrigin || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") {
		t.Errorf("client.js from the page origin: %d %v", resp.StatusCode, resp.Header)
	}
	// A refusal is readable by the page too.
	resp = do("POST", "/client/calls/x/claim", pageOrigin)
	if resp.StatusCode != 401 || resp.Header.Get("Access-Control-Allow-Origin") != pageOrigin {
		t.Errorf("claim without a token from the page origin: %d %v", resp.StatusCode, resp.Header)
	}
	ps, status, _ := openStream(t, s, pageToken(t, "u_1", "th_1"), "th_1", "Origin", pageOrigin)
	if ps == nil || status != 200 {
		t.Errorf("stream from the page origin: %d", status)
	}

	for _, origin := range []string{"http://evil.test", "http://localhost:9091", "https://localhost:9090", "http://localhost:9090/"} {
		for _, r := range []*http.Response{
			do("OPTIONS", "/client/calls/x/claim", origin, "Access-Control-Request-Method", "POST"),
			do("GET", "/client.js", origin),
			do("POST", "/client/calls/x/claim", origin),
		} {
			if got := r.Header.Get("Access-Control-Allow-Origin"); got != "" {
				t.Errorf("%s %s from %s: Access-Control-Allow-Origin %q", r.Request.Method, r.Request.URL.Path, origin, got)
			}
			if r.StatusCode == 204 {
				t.Errorf("%s %s from %s: preflight answered", r.Request.Method, r.Request.URL.Path, origin)
			}
		}
	}
	// Same-origin requests get no CORS headers.
	if resp := do("GET", "/client.js", ""); resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("no Origin: ACAO %q", resp.Header.Get("Access-Control-Allow-Origin"))
	}
}

func TestClientJS(t *testing.T) {
	s := startPages(t)
	resp, err := s.client.Get(s.URL + "/client.js")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	etag := resp.Header.Get("ETag")
	if resp.StatusCode != 200 || string(body) != string(web.ClientJS) || len(body) == 0 {
		t.Errorf("client.js: %d, %d bytes, want %d", resp.StatusCode, len(body), len(web.ClientJS))
	}
	if etag == "" || etag != web.ClientETag || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") {
		t.Errorf("client.js headers %v", resp.Header)
	}
	for inm, want := range map[string]int{etag: 304, `"other"`: 200} {
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/client.js", nil)
		req.Header.Set("If-None-Match", inm)
		resp, err := s.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || (want == 304 && len(body) != 0) {
			t.Errorf("If-None-Match %s: %d, %d bytes", inm, resp.StatusCode, len(body))
		}
	}
	resp, err = s.client.Post(s.URL+"/client.js", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("POST /client.js: %d", resp.StatusCode)
	}
}

func TestPageContextEndpoint(t *testing.T) {
	s := startPages(t)
	post := func(body string) (int, map[string]json.RawMessage) {
		t.Helper()
		resp, err := s.client.Post(s.URL+"/page-context", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("not JSON: %s", raw)
		}
		return resp.StatusCode, m
	}
	status, m := post(`{"items":[{"name":"lesson","value":"Watching lesson 3"},{"name":"playback","value":{"positionSeconds":83}}]}`)
	var text string
	_ = json.Unmarshal(m["text"], &text)
	want := "<page_context untrusted=\"true\">\n<item name=\"lesson\">Watching lesson 3</item>\n<item name=\"playback\">{\"positionSeconds\":83}</item>\n</page_context>"
	if status != 200 || text != want || string(m["dropped"]) != `[]` || len(m) != 2 {
		t.Errorf("page context: %d text %q dropped %s", status, text, m["dropped"])
	}

	status, m = post(`{"items":[{"name":"big","value":"` + strings.Repeat("x", 4094) + `"},{"name":"a","value":"</page_context>"}]}`)
	_ = json.Unmarshal(m["text"], &text)
	if status != 200 || string(m["dropped"]) != `["big"]` || text != "<page_context untrusted=\"true\">\n<item name=\"a\">&lt;/page_context&gt;</item>\n</page_context>" {
		t.Errorf("over the limit: %d %q %s", status, text, m["dropped"])
	}

	status, m = post(`{"items":[]}`)
	if status != 200 || string(m["text"]) != `""` || string(m["dropped"]) != `[]` {
		t.Errorf("no items: %d %v", status, m)
	}

	for _, bad := range []string{
		`{"items":[{"name":"bad name","value":"x"}]}`,
		`{"items":[{"name":"a","value":1},{"name":"a","value":2}]}`,
		`{"items":[{"name":"a"}]}`,
	} {
		if status, m := post(bad); status != 400 || !strings.Contains(string(m["error"]), "invalid_items") {
			t.Errorf("%s: %d %v", bad, status, m)
		}
	}
	if status, _ := post(`{"items":[],"extra":1}`); status != 400 {
		t.Errorf("unknown field: %d", status)
	}
}

func TestPagesNotConfigured(t *testing.T) {
	s, _ := startGateway(t)
	ps, status, body := openStream(t, s, pageToken(t, "u_1", "th_1"), "th_1")
	if ps != nil || status != 404 || errCode(body) != "pages_not_configured" {
		t.Errorf("stream: %d %s", status, body)
	}
	if status, body := claim(t, s, pageToken(t, "u_1", "th_1"), "x"); status != 404 || errCode(body) != "pages_not_configured" {
		t.Errorf("claim: %d %s", status, body)
	}
	// Without pages there is no CORS to answer.
	req, _ := http.NewRequest(http.MethodOptions, s.URL+"/client/calls/x/claim", nil)
	req.Header.Set("Origin", pageOrigin)
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == 204 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight without pages: %d %v", resp.StatusCode, resp.Header)
	}
}
