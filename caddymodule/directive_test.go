package caddymodule

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/apitest"
)

// The endpoints are tested in internal/httpapi against an httptest
// server. The tests here check what only Caddy gives them: that the
// directive's config reaches the API (one call per area, through a
// running Caddy), that other requests go to the next handler, and what
// lives in Caddy's storage across a reload.

// TestDirectiveInvoke makes one call through Caddy with testConfig: the
// manifest file, the inline tools, the component's env, the identity block
// and the upstream all come from the Caddyfile.
func TestDirectiveInvoke(t *testing.T) {
	tc, rec, _ := startGateway(t)

	status, a := client(tc).Invoke(t, "save",
		`{"input":{"id":"a..b c","n":7,"note":"hi"},"callId":"toolu_01","context":{"source":"thread","threadId":"th_1"},`+apitest.Who+`}`)
	if status != 200 || a.IsError || a.Content != "ok" || a.Status != "done" || a.CallID != "toolu_01" || a.Tool != "save" {
		t.Fatalf("answer %d %+v", status, a)
	}
	got := rec.Get(t, "/items/")
	if got.Method != "POST" || got.Path != "/items/a..b%20c" || got.Query != "n=7" || got.Header.Get("X-Note") != "hi" {
		t.Errorf("upstream saw %s %s?%s X-Note %q", got.Method, got.Path, got.Query, got.Header.Get("X-Note"))
	}
	claims := client(tc).VerifyWithJWKS(t, strings.TrimPrefix(got.Header.Get("Authorization"), "Bearer "))
	if claims["iss"] != "https://tools.test" || claims["sub"] != "u_1" || claims["install"] != "in_1" || claims["aud"] != "api" {
		t.Errorf("claims %v", claims)
	}
	if iat, exp := claims["iat"].(float64), claims["exp"].(float64); exp-iat != 120 {
		t.Errorf("exp-iat = %v, want the configured ttl 120", exp-iat)
	}

	// A manifest's url tool, with its component's env.
	status, a = client(tc).Invoke(t, "ext_text", `{"input":{"q":"a b&c=d"}}`)
	if status != 200 || a.IsError || a.Content != "plain <b>text</b>" {
		t.Fatalf("ext_text: %d %+v", status, a)
	}
	if got := rec.Get(t, "/text"); got.Query != "q=a+b%26c%3Dd" || got.Header.Get("X-Key") != "secret-key" {
		t.Errorf("query %q, X-Key %q", got.Query, got.Header.Get("X-Key"))
	}
	// upstream_timeout and max_request_size are the Caddyfile's.
	if status, a := client(tc).Invoke(t, "slow", `{"input":{},`+apitest.Who+`}`); status != 200 || !a.IsError || !strings.Contains(a.Content, "did not answer within 300ms") {
		t.Errorf("slow: %d %+v", status, a)
	}
	if status, a := client(tc).Invoke(t, "save", `{"input":{"id":"`+strings.Repeat("x", 70<<10)+`"}}`); status != 413 || a.Error == nil || a.Error.Code != "too_large" {
		t.Errorf("70 KiB envelope: %d %+v", status, a.Error)
	}
}

// TestNextHandlerAndStoredKey: paths that are not the API's go to the
// next handler; the generated identity key is kept in Caddy's storage, so
// a reload serves the same one.
func TestNextHandlerAndStoredKey(t *testing.T) {
	tc, _, dataDir := startGateway(t)

	tc.AssertGetResponse("http://127.0.0.1:9080/elsewhere", 200, "next handler")
	tc.AssertGetResponse(base+"/unowned", 200, "next handler")
	// ServeMux would redirect this to /calls/, outside /toolgate/; the
	// client must not follow a redirect for this to tell.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if resp, err := noRedirect.Get(base + "/calls"); err != nil {
		t.Error(err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "next handler" {
			t.Errorf("GET /calls: %d %q, want the next handler", resp.StatusCode, body)
		}
	}
	req, _ := http.NewRequest(http.MethodDelete, base+"/tools", nil)
	r := tc.AssertResponseCode(req, 405)
	if r.Header.Get("Allow") != "GET" {
		t.Errorf("Allow %q", r.Header.Get("Allow"))
	}

	kid := client(tc).JWKSKeys(t)
	if len(kid) != 1 {
		t.Fatalf("jwks has %d keys", len(kid))
	}
	entries, _ := filepath.Glob(filepath.Join(dataDir, "toolgate", "identity", "*.pem"))
	if len(entries) != 1 {
		t.Errorf("storage holds %v", entries)
	}
	rec2 := apitest.NewRecorder(t)
	initServer(tc, testConfig(t, rec2.URL, dataDir))
	kid2 := client(tc).JWKSKeys(t)
	for k := range kid {
		if _, ok := kid2[k]; !ok {
			t.Errorf("after reload the key %s is gone: %v", k, kid2)
		}
	}
}

// TestDirectiveCallers: the callers block reaches the API: a request
// without a token is refused with a challenge; a token from the JWKS URL,
// with the block's issuer and audience, is the caller, its claims drive
// the policies, and its identity is what the component is told.
func TestDirectiveCallers(t *testing.T) {
	rec := apitest.NewRecorder(t)
	p := apitest.NewPlatform(t, "k1")
	tc := caddytest.NewTester(t)
	initServer(tc, callersConfig(t, rec.URL, p.URL))

	if resp, body := client(tc).Get(t, base+"/tools"); resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") {
		t.Errorf("no token: %d %s %q", resp.StatusCode, body, resp.Header.Get("WWW-Authenticate"))
	}
	wrongAud := apitest.GoodClaims("u_7", "user")
	wrongAud["aud"] = "other"
	if status, a := client(tc).Invoke(t, "open", `{"input":{}}`, "Authorization", "Bearer "+p.Token(t, "k1", wrongAud)); status != 401 || a.Error == nil || a.Error.Code != "invalid_token" {
		t.Errorf("wrong audience: %d %+v", status, a.Error)
	}
	user := p.Token(t, "k1", apitest.GoodClaims("u_7", "user"))
	if status, a := client(tc).Invoke(t, "admin_only", `{"input":{}}`, "Authorization", "Bearer "+user); status != 403 || a.Error == nil || a.Error.Code != "forbidden" {
		t.Errorf("user calling admin_only: %d %+v", status, a.Error)
	}
	status, a := client(tc).Invoke(t, "admin_only", `{"input":{},"identity":{"user":"someone_else"}}`, "Authorization", "Bearer "+p.Token(t, "k1", apitest.GoodClaims("u_8", "admin")))
	if status != 200 || a.IsError || a.Content != "saved" {
		t.Fatalf("admin calling admin_only: %d %+v", status, a)
	}
	claims := client(tc).VerifyWithJWKS(t, strings.TrimPrefix(rec.Get(t, "/md").Header.Get("Authorization"), "Bearer "))
	if claims["sub"] != "u_8" || claims["install"] != "in_9" {
		t.Errorf("the component was told %v, want the caller token's u_8/in_9", claims)
	}
}

// TestDirectivePages: the pages block reaches the API: its origins get
// CORS, its secret, issuer and audience verify the page token, its cap on
// streams holds, and a client tool call goes through the page and back.
func TestDirectivePages(t *testing.T) {
	cfg := strings.Replace(pagesConfig(t, dataDir(t)), "origins "+apitest.PageOrigin, "origins "+apitest.PageOrigin+"\n\t\t\t\tmax_streams_per_token 1", 1)
	tc := caddytest.NewTester(t)
	initServer(tc, cfg)

	req, _ := http.NewRequest(http.MethodOptions, base+"/client/calls/x/claim", nil)
	req.Header.Set("Origin", apitest.PageOrigin)
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp := tc.AssertResponseCode(req, 204)
	if resp.Header.Get("Access-Control-Allow-Origin") != apitest.PageOrigin {
		t.Errorf("preflight from the pages origin: %v", resp.Header)
	}

	if ps, status, body := apitest.OpenStream(t, base, apitest.SignHS256(t, apitest.PageClaims("u_1", "th_1"), apitest.PageSecret+"-not"), "th_1"); ps != nil || status != 401 || apitest.ErrCode(body) != "invalid_token" {
		t.Errorf("a token of another secret: %d %s", status, body)
	}
	tok := apitest.PageToken(t, "u_1", "th_1")
	page, status, body := apitest.OpenStream(t, base, tok, "th_1")
	if page == nil {
		t.Fatalf("stream: %d %s", status, body)
	}
	if ps, status, body := apitest.OpenStream(t, base, tok, "th_1"); ps != nil || status != http.StatusTooManyRequests {
		t.Errorf("a second stream over max_streams_per_token 1: %d %s", status, body)
	}

	inv := client(tc).InvokeAsync("where", `{"input":{"q":"pos"},"callId":"dp_1",`+apitest.ThreadCtx+`,`+apitest.PageIdentity+`}`)
	if o := page.Next(t); o.CallID != "dp_1" || o.Name != "video_position" || string(o.Input) != `{"q":"pos"}` {
		t.Fatalf("offer %+v", o)
	}
	if status, body := client(tc).Claim(t, tok, "dp_1"); status != 200 {
		t.Fatalf("claim: %d %s", status, body)
	}
	if status, body := client(tc).PostResult(t, tok, "dp_1", `{"result":"at 83s"}`); status != 200 {
		t.Fatalf("result: %d %s", status, body)
	}
	if r := apitest.WaitInvoke(t, inv); r.Status != 200 || r.A.Status != "done" || r.A.IsError || r.A.Content != "at 83s" {
		t.Errorf("invoke: %d %s", r.Status, r.Raw)
	}
}

// TestDirectivePagesInstalls: the pages block's install_claim names the
// page token's installation claim and max_pending_per_user caps a user's
// waiting calls, through Caddy: a page of the caller's installation (by
// that claim) answers its call, one naming it in another claim sees
// nothing, and the user's second call is refused naming the cap.
func TestDirectivePagesInstalls(t *testing.T) {
	cfg := strings.Replace(pagesConfig(t, dataDir(t)), "origins "+apitest.PageOrigin,
		"origins "+apitest.PageOrigin+"\n\t\t\t\tinstall_claim org\n\t\t\t\tmax_pending_per_user 1", 1)
	tc := caddytest.NewTester(t)
	initServer(tc, cfg)

	claims := apitest.PageClaims("u_1", "th_1")
	claims["org"] = "in_1"
	tok := apitest.SignHS256(t, claims, apitest.PageSecret)
	page, status, body := apitest.OpenStream(t, base, tok, "th_1")
	if page == nil {
		t.Fatalf("stream: %d %s", status, body)
	}
	// install is not the claim the pages read: this page has none.
	other, _, _ := apitest.OpenStream(t, base, apitest.InstallPageToken(t, "u_1", "in_1", "th_1"), "th_1")

	identity := `"identity":{"user":"u_1","install":"in_1"}`
	inv := client(tc).InvokeAsync("where", `{"input":{},"callId":"dpi_1",`+apitest.ThreadCtx+`,`+identity+`}`)
	if o := page.Next(t); o.CallID != "dpi_1" {
		t.Fatalf("offer %+v", o)
	}
	other.None(t, 100*time.Millisecond)
	r := apitest.WaitInvoke(t, client(tc).InvokeAsync("where", `{"input":{},"callId":"dpi_2","context":{"source":"thread","threadId":"th_2"},`+identity+`}`))
	if r.Status != http.StatusTooManyRequests || !strings.Contains(r.Raw, "max_pending_per_user") {
		t.Errorf("a second call of u_1: %d %s, want 429 naming max_pending_per_user", r.Status, r.Raw)
	}
	if status, body := client(tc).PostResult(t, tok, "dpi_1", `{"result":"in_1"}`); status != 200 {
		t.Fatalf("result: %d %s", status, body)
	}
	if r := apitest.WaitInvoke(t, inv); r.A.Content != "in_1" || r.A.IsError {
		t.Errorf("invoke: %d %s", r.Status, r.Raw)
	}
}

// TestDirectiveMCP opens one MCP session through Caddy: it lists the
// Caddyfile's tools with a manifest's annotations, and a call reaches the
// component with the identity of its _meta.
func TestDirectiveMCP(t *testing.T) {
	tc, rec := startMCPGateway(t)
	cs := apitest.MCPClient{Endpoint: mcpEndpoint}.Session(t)
	tools := apitest.ListTools(t, cs)
	if len(tools) != 17 {
		t.Errorf("listed %d tools, want the 16 of testConfig and annotated", len(tools))
	}
	if a := tools["annotated"]; a == nil || a.Annotations == nil || !a.Annotations.ReadOnlyHint {
		t.Errorf("annotated: %s", apitest.Dump(a))
	}
	res := apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "md", Arguments: map[string]any{}, Meta: apitest.U1()})
	if res.IsError || apitest.ModelText(t, res) != "saved" {
		t.Fatalf("md: %s", apitest.Dump(res))
	}
	claims := client(tc).VerifyWithJWKS(t, strings.TrimPrefix(rec.Get(t, "/md").Header.Get("Authorization"), "Bearer "))
	if claims["sub"] != "u_1" || claims["install"] != "in_1" {
		t.Errorf("the component was told %v, want u_1/in_1", claims)
	}
}
