package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/apitest"
	"github.com/toolgate/toolgate/internal/clienttools"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/web"
)

// pagesOptions is the pages config of the module's tests: page tokens
// signed with apitest.PageSecret (issuer https://app.test, audience
// toolgate-pages), one more page origin, client_tool_timeout 2s, a bolt
// ledger, and one client tool.
func pagesOptions(t *testing.T) options {
	t.Helper()
	_, pages, err := NewAuthenticators(nil, &TokenConfig{Secret: apitest.PageSecret, Issuer: "https://app.test", Audience: "toolgate-pages"}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	return options{
		sources: []manifest.Source{{Name: "inline tools", Tools: parseTools(t, `{"tools":[
{"name":"where","description":"Where the video is.","input_schema":{"type":"object","properties":{"q":{"type":"string"}}},"target":{"type":"kazzle","name":"video_position"}}]}`)}},
		clientTimeout: 2 * time.Second,
		api:           Config{Pages: pages, PageOrigins: []string{apitest.PageOrigin}},
	}
}

func startPages(t *testing.T) *server {
	return startServer(t, pagesOptions(t))
}

// pending checks an invoke has not answered yet.
func pending(t *testing.T, ch <-chan apitest.InvokeResult) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("the invoke answered before the page: %d %s", r.Status, r.Raw)
	default:
	}
}

func TestClientToolFlow(t *testing.T) {
	s := startPages(t)
	tok := apitest.PageToken(t, "u_1", "th_1")
	page, status, body := apitest.OpenStream(t, s.URL, tok, "th_1")
	if page == nil {
		t.Fatalf("stream: %d %s", status, body)
	}

	inv := s.InvokeAsync("where", `{"input":{ "q": "pos" },"callId":"ct_1",`+apitest.ThreadCtx+`,`+apitest.PageIdentity+`}`)
	var raw string
	select {
	case raw = <-page.Raw:
	case <-time.After(5 * time.Second):
		t.Fatal("the page got no call")
	}
	o := <-page.Offers
	if raw != `{"callId":"ct_1","name":"video_position","input":{"q":"pos"}}` {
		t.Errorf("event data %s", raw)
	}
	if o.CallID != "ct_1" || o.Name != "video_position" || string(o.Input) != `{"q":"pos"}` {
		t.Errorf("offer %+v", o)
	}
	pending(t, inv)
	if status, a := s.GetCall(t, "/calls/ct_1?user=u_1"); status != 200 || a.Status != "awaiting_client" || a.Content != "" {
		t.Errorf("GET while waiting: %d %+v", status, a)
	}

	if status, body := s.Claim(t, tok, "ct_1"); status != 200 || body != `{"ok":true}` {
		t.Fatalf("claim: %d %s", status, body)
	}
	pending(t, inv)
	if status, body := s.PostResult(t, tok, "ct_1", `{"result": {"positionSeconds": 83, "title": "L3"}}`); status != 200 {
		t.Fatalf("result: %d %s", status, body)
	}
	r := apitest.WaitInvoke(t, inv)
	want := `{"positionSeconds":83,"title":"L3"}`
	if r.Status != 200 || r.A.Status != "done" || r.A.IsError || r.A.Content != want || r.A.CallID != "ct_1" || r.A.Tool != "where" {
		t.Fatalf("invoke: %d %s", r.Status, r.Raw)
	}

	if status, body := s.PostResult(t, tok, "ct_1", `{"result":"again"}`); status != 409 || apitest.ErrCode(body) != "conflict" {
		t.Errorf("second result: %d %s", status, body)
	}
	if status, body := s.Claim(t, tok, "ct_1"); status != 409 || apitest.ErrCode(body) != "conflict" {
		t.Errorf("claim after the result: %d %s", status, body)
	}
	if status, a := s.GetCall(t, "/calls/ct_1?user=u_1"); status != 200 || a.Status != "done" || a.Content != want || a.IsError {
		t.Errorf("GET /calls: %d %+v", status, a)
	}

	// A repeat of the call id gets the recorded result; no page is asked.
	again := apitest.WaitInvoke(t, s.InvokeAsync("where", `{"input":{"q":"pos"},"callId":"ct_1",`+apitest.ThreadCtx+`,`+apitest.PageIdentity+`}`))
	if again.Status != 200 || again.Raw != r.Raw {
		t.Errorf("repeat: %d %s, want %s", again.Status, again.Raw, r.Raw)
	}
	page.None(t, 200*time.Millisecond)
	page2, _, _ := apitest.OpenStream(t, s.URL, tok, "th_1")
	page2.None(t, 100*time.Millisecond)
}

// answerPage opens a stream, invokes where, and answers the call with body.
func answerPage(t *testing.T, s *server, callID, body string) apitest.InvokeResult {
	t.Helper()
	tok := apitest.PageToken(t, "u_1", "th_1")
	page, status, msg := apitest.OpenStream(t, s.URL, tok, "th_1")
	if page == nil {
		t.Fatalf("stream: %d %s", status, msg)
	}
	defer page.Close()
	inv := s.InvokeAsync("where", `{"input":{},"callId":"`+callID+`",`+apitest.ThreadCtx+`,`+apitest.PageIdentity+`}`)
	o := page.Next(t)
	if o.CallID != callID || string(o.Input) != `{}` {
		t.Errorf("offer %+v", o)
	}
	if status, msg := s.Claim(t, tok, callID); status != 200 {
		t.Fatalf("claim: %d %s", status, msg)
	}
	if status, msg := s.PostResult(t, tok, callID, body); status != 200 {
		t.Fatalf("result %s: %d %s", body, status, msg)
	}
	return apitest.WaitInvoke(t, inv)
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
		if r.Status != 200 || r.A.Status != "done" || r.A.Content != c.content || r.A.IsError != c.isError {
			t.Errorf("%s: %d %s, want content %q isError %v", c.body, r.Status, r.Raw, c.content, c.isError)
		}
	}

	// A malformed result is refused and the call still waits for a good one.
	tok := apitest.PageToken(t, "u_1", "th_1")
	page, _, _ := apitest.OpenStream(t, s.URL, tok, "th_1")
	inv := s.InvokeAsync("where", `{"callId":"res_bad",`+apitest.ThreadCtx+`,`+apitest.PageIdentity+`}`)
	page.Next(t)
	for _, bad := range []string{`{"result":1,"other":2}`, `{"result":`, `[]`, `{"result":1} {}`} {
		if status, body := s.PostResult(t, tok, "res_bad", bad); status != 400 {
			t.Errorf("result %s: %d %s", bad, status, body)
		}
	}
	pending(t, inv)
	if status, body := s.PostResult(t, tok, "res_bad", `{"result":7}`); status != 200 {
		t.Fatalf("result: %d %s", status, body)
	}
	if r := apitest.WaitInvoke(t, inv); r.A.Content != "7" || r.A.IsError {
		t.Errorf("after malformed results: %s", r.Raw)
	}
}

func TestClientToolTimeout(t *testing.T) {
	s := startPages(t)
	tok := apitest.PageToken(t, "u_1", "th_1")
	begin := time.Now()
	r := apitest.WaitInvoke(t, s.InvokeAsync("where", `{"input":{},"callId":"late_1",`+apitest.ThreadCtx+`,`+apitest.PageIdentity+`}`))
	if r.Status != 200 || r.A.Status != "done" || !r.A.IsError || r.A.Content != "client tool timed out" {
		t.Fatalf("invoke with no page: %d %s", r.Status, r.Raw)
	}
	if d := time.Since(begin); d < 2*time.Second || d > 2900*time.Millisecond {
		t.Errorf("answered after %v, want the 2s client_tool_timeout", d)
	}
	if status, body := s.Claim(t, tok, "late_1"); status != 409 {
		t.Errorf("late claim: %d %s", status, body)
	}
	if status, body := s.PostResult(t, tok, "late_1", `{"result":"late"}`); status != 409 {
		t.Errorf("late result: %d %s", status, body)
	}
	// A page opening now is not offered the call.
	page, _, _ := apitest.OpenStream(t, s.URL, tok, "th_1")
	page.None(t, 100*time.Millisecond)
	if status, a := s.GetCall(t, "/calls/late_1?user=u_1"); status != 200 || a.Content != "client tool timed out" || !a.IsError {
		t.Errorf("GET /calls: %d %+v", status, a)
	}
}

func TestClientToolNeedsThread(t *testing.T) {
	s := startPages(t)
	page, _, _ := apitest.OpenStream(t, s.URL, apitest.PageToken(t, "u_1", "th_1"), "th_1")
	for _, ctx := range []string{``, `"context":{"source":"api"},`} {
		r := apitest.WaitInvoke(t, s.InvokeAsync("where", `{"input":{},`+ctx+apitest.PageIdentity+`}`))
		if r.Status != 200 || r.A.Status != "done" || !r.A.IsError || r.A.Content != "client tools need a thread" {
			t.Errorf("api call %q: %d %s", ctx, r.Status, r.Raw)
		}
	}
	page.None(t, 100*time.Millisecond)
}

func TestPageAuth(t *testing.T) {
	s := startPages(t)

	if ps, status, body := apitest.OpenStream(t, s.URL, "", "th_1"); ps != nil || status != 401 || apitest.ErrCode(body) != "unauthorized" {
		t.Errorf("no token: %d %s", status, body)
	}
	expired := apitest.PageClaims("u_1", "th_1")
	expired["exp"] = time.Now().Add(-time.Hour).Unix()
	otherIss := apitest.PageClaims("u_1", "th_1")
	otherIss["iss"] = "https://evil.test"
	otherAud := apitest.PageClaims("u_1", "th_1")
	otherAud["aud"] = "someone-else"
	noThread := apitest.PageClaims("u_1", "th_1")
	delete(noThread, "thread")
	noSub := apitest.PageClaims("u_1", "th_1")
	delete(noSub, "sub")
	noExp := apitest.PageClaims("u_1", "th_1")
	delete(noExp, "exp")
	numThread := apitest.PageClaims("u_1", "th_1")
	numThread["thread"] = 1
	for name, tok := range map[string]string{
		"bad signature": apitest.SignHS256(t, apitest.PageClaims("u_1", "th_1"), apitest.PageSecret+"-not"),
		"garbage":       "not.a.token",
		"expired":       apitest.SignHS256(t, expired, apitest.PageSecret),
		"other issuer":  apitest.SignHS256(t, otherIss, apitest.PageSecret),
		"other aud":     apitest.SignHS256(t, otherAud, apitest.PageSecret),
		"no thread":     apitest.SignHS256(t, noThread, apitest.PageSecret),
		"no sub":        apitest.SignHS256(t, noSub, apitest.PageSecret),
		"no exp":        apitest.SignHS256(t, noExp, apitest.PageSecret),
		"number thread": apitest.SignHS256(t, numThread, apitest.PageSecret),
		"none alg": func() string {
			s, _ := jwt.NewWithClaims(jwt.SigningMethodNone, apitest.PageClaims("u_1", "th_1")).SignedString(jwt.UnsafeAllowNoneSignatureType)
			return s
		}(),
	} {
		if ps, status, body := apitest.OpenStream(t, s.URL, tok, "th_1"); ps != nil || status != 401 || apitest.ErrCode(body) != "invalid_token" {
			t.Errorf("%s: stream %d %s", name, status, body)
		}
		if status, body := s.Claim(t, tok, "x"); status != 401 {
			t.Errorf("%s: claim %d %s", name, status, body)
		}
	}
	if status, body := s.Claim(t, "", "x"); status != 401 {
		t.Errorf("claim without a token: %d %s", status, body)
	}
	if status, body, _ := s.PagePost(t, "", "/client/calls/x/claim", "", "Authorization", "Basic dTpw"); status != 401 {
		t.Errorf("claim with basic auth: %d %s", status, body)
	}

	th1 := apitest.PageToken(t, "u_1", "th_1")
	th2 := apitest.PageToken(t, "u_1", "th_2")
	other := apitest.PageToken(t, "u_2", "th_1")
	if ps, status, body := apitest.OpenStream(t, s.URL, th2, "th_1"); ps != nil || status != 404 {
		t.Errorf("th_2's token reading th_1: %d %s", status, body)
	}
	if ps, status, body := apitest.OpenStream(t, s.URL, th1, ""); ps != nil || status != 404 {
		t.Errorf("no threadId: %d %s", status, body)
	}

	// A call of th_1: only u_1's th_1 page may claim and answer it.
	page, _, _ := apitest.OpenStream(t, s.URL, th1, "th_1")
	otherPage, _, _ := apitest.OpenStream(t, s.URL, other, "th_1")
	th2Page, _, _ := apitest.OpenStream(t, s.URL, th2, "th_2")
	inv := s.InvokeAsync("where", `{"input":{},"callId":"auth_1",`+apitest.ThreadCtx+`,`+apitest.PageIdentity+`}`)
	page.Next(t)
	otherPage.None(t, 100*time.Millisecond)
	th2Page.None(t, 10*time.Millisecond)
	for name, tok := range map[string]string{"another thread": th2, "another user": other} {
		if status, body := s.Claim(t, tok, "auth_1"); status != 404 || apitest.ErrCode(body) != "unknown_call" {
			t.Errorf("%s claims: %d %s", name, status, body)
		}
		if status, body := s.PostResult(t, tok, "auth_1", `{"result":"stolen"}`); status != 404 {
			t.Errorf("%s posts: %d %s", name, status, body)
		}
	}
	if status, body := s.Claim(t, th1, "auth_1"); status != 200 {
		t.Fatalf("the thread's page claims: %d %s", status, body)
	}
	if status, body := s.PostResult(t, th1, "auth_1", `{"result":"mine"}`); status != 200 {
		t.Fatalf("the thread's page posts: %d %s", status, body)
	}
	if r := apitest.WaitInvoke(t, inv); r.A.Content != "mine" {
		t.Errorf("invoke: %s", r.Raw)
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
		if status, body, _ := s.PagePost(t, th1, p, ""); status != 404 {
			t.Errorf("POST %s: %d %s", p, status, body)
		}
	}
}

func TestClaimLapseHTTP(t *testing.T) {
	s := startPages(t)
	tok := apitest.PageToken(t, "u_1", "th_1")
	a, _, _ := apitest.OpenStream(t, s.URL, tok, "th_1")
	inv := s.InvokeAsync("where", `{"input":{"q":"lapse"},"callId":"lapse_1",`+apitest.ThreadCtx+`,`+apitest.PageIdentity+`}`)
	if o := a.Next(t); o.CallID != "lapse_1" {
		t.Fatalf("A got %+v", o)
	}
	if status, body := s.Claim(t, tok, "lapse_1"); status != 200 {
		t.Fatalf("A claims: %d %s", status, body)
	}
	// A goes away without a result, e.g. the tab reloads.
	a.Close()

	// B connects and is offered the call again. The server notices A's
	// disconnect shortly after the client does: until it has, B is not the
	// thread's only stream and the claim holds, so B reconnects.
	var offer clienttools.Offer
	for i := 0; ; i++ {
		if i == 50 {
			t.Fatal("the call is never offered again after A left")
		}
		b, status, body := apitest.OpenStream(t, s.URL, tok, "th_1")
		if b == nil {
			t.Fatalf("B: %d %s", status, body)
		}
		select {
		case offer = <-b.Offers:
		case <-time.After(100 * time.Millisecond):
			b.Close()
			continue
		}
		if offer.CallID != "lapse_1" || string(offer.Input) != `{"q":"lapse"}` {
			t.Fatalf("B got %+v", offer)
		}
		if status, body := s.Claim(t, tok, "lapse_1"); status != 200 {
			t.Fatalf("B claims: %d %s", status, body)
		}
		pending(t, inv)
		if status, body := s.PostResult(t, tok, "lapse_1", `{"result":"from B"}`); status != 200 {
			t.Fatalf("B posts: %d %s", status, body)
		}
		break
	}
	if r := apitest.WaitInvoke(t, inv); r.A.Content != "from B" || r.A.IsError {
		t.Errorf("invoke: %s", r.Raw)
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

	resp := do("OPTIONS", "/client/calls/x/claim", apitest.PageOrigin, "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization,content-type")
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != apitest.PageOrigin ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Authorization") ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "POST") {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	if !strings.Contains(strings.Join(resp.Header.Values("Vary"), ","), "Origin") {
		t.Errorf("preflight Vary %v", resp.Header.Values("Vary"))
	}
	resp = do("OPTIONS", "/client/calls?threadId=th_1", apitest.PageOrigin, "Access-Control-Request-Method", "GET")
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != apitest.PageOrigin {
		t.Errorf("stream preflight: %d %v", resp.StatusCode, resp.Header)
	}

	resp = do("GET", "/client.js", apitest.PageOrigin)
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != apitest.PageOrigin || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") {
		t.Errorf("client.js from the page origin: %d %v", resp.StatusCode, resp.Header)
	}
	// A refusal is readable by the page too.
	resp = do("POST", "/client/calls/x/claim", apitest.PageOrigin)
	if resp.StatusCode != 401 || resp.Header.Get("Access-Control-Allow-Origin") != apitest.PageOrigin {
		t.Errorf("claim without a token from the page origin: %d %v", resp.StatusCode, resp.Header)
	}
	ps, status, _ := apitest.OpenStream(t, s.URL, apitest.PageToken(t, "u_1", "th_1"), "th_1", "Origin", apitest.PageOrigin)
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
	post := func(body string) (int, map[string]jsontext.Value) {
		t.Helper()
		resp, err := s.client.Post(s.URL+"/page-context", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var m map[string]jsontext.Value
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
	ps, status, body := apitest.OpenStream(t, s.URL, apitest.PageToken(t, "u_1", "th_1"), "th_1")
	if ps != nil || status != 404 || apitest.ErrCode(body) != "pages_not_configured" {
		t.Errorf("stream: %d %s", status, body)
	}
	if status, body := s.Claim(t, apitest.PageToken(t, "u_1", "th_1"), "x"); status != 404 || apitest.ErrCode(body) != "pages_not_configured" {
		t.Errorf("claim: %d %s", status, body)
	}
	// Without pages there is no CORS to answer.
	req, _ := http.NewRequest(http.MethodOptions, s.URL+"/client/calls/x/claim", nil)
	req.Header.Set("Origin", apitest.PageOrigin)
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
