package httpapi

import (
	"bytes"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/apitest"
)

func TestInvokeAppTarget(t *testing.T) {
	s, rec := startGateway(t)

	status, a := s.Invoke(t, "save",
		`{"input":{"id":"a..b c","n":7,"note":"hi","tags":["x"]},"callId":"toolu_01","context":{"source":"thread","threadId":"th_1"},`+apitest.Who+`}`,
		"Authorization", "Bearer caller-token", "Kazzle-Tool-Context", `{"source":"api"}`)
	if status != 200 || a.IsError || a.Content != "ok" || a.Status != "done" || a.CallID != "toolu_01" || a.Tool != "save" {
		t.Fatalf("answer %d %+v", status, a)
	}
	got := rec.Get(t, "/items/")
	if got.Method != "POST" || got.Path != "/items/a..b%20c" {
		t.Errorf("upstream saw %s %s, want POST /items/a..b%%20c", got.Method, got.Path)
	}
	if got.Query != "n=7" {
		t.Errorf("query %q, want n=7", got.Query)
	}
	if got.Header.Get("X-Note") != "hi" {
		t.Errorf("X-Note %q", got.Header.Get("X-Note"))
	}
	if got.Header.Get("Content-Type") != "application/json" {
		t.Errorf("Content-Type %q", got.Header.Get("Content-Type"))
	}
	var body map[string]any
	if err := json.Unmarshal(got.Body, &body); err != nil || body["id"] != "a..b c" || body["n"] != float64(7) {
		t.Errorf("body %s", got.Body)
	}
	if ctx := got.Header.Get("Kazzle-Tool-Context"); ctx != `{"source":"thread","threadId":"th_1"}` {
		t.Errorf("Kazzle-Tool-Context %q", ctx)
	}
	auth := got.Header.Get("Authorization")
	if auth == "Bearer caller-token" || !strings.HasPrefix(auth, "Bearer ") {
		t.Fatalf("Authorization %q: the caller's header went through or none was set", auth)
	}
	claims := s.VerifyWithJWKS(t, strings.TrimPrefix(auth, "Bearer "))
	if claims["iss"] != "https://tools.test" || claims["sub"] != "u_1" || claims["install"] != "in_1" {
		t.Errorf("claims %v", claims)
	}
	if claims["aud"] != "api" {
		t.Errorf("aud %v, want the string api", claims["aud"])
	}
	iat, exp := claims["iat"].(float64), claims["exp"].(float64)
	if exp-iat != 120 {
		t.Errorf("exp-iat = %v, want the configured ttl 120", exp-iat)
	}

	// An api call gets the api context; a GET with no body sends none.
	status, a = s.Invoke(t, "get_item", `{"input":{"id":"b1"},`+apitest.Who+`}`)
	if status != 200 || a.IsError || !strings.HasPrefix(a.CallID, "call_") {
		t.Fatalf("answer %d %+v", status, a)
	}
	got = rec.Get(t, "/items/")
	if got.Method != "GET" || len(got.Body) != 0 || got.Header.Get("Content-Type") != "" {
		t.Errorf("GET sent a body or content type: %q %q", got.Body, got.Header.Get("Content-Type"))
	}
	if ctx := got.Header.Get("Kazzle-Tool-Context"); ctx != `{"source":"api"}` {
		t.Errorf("Kazzle-Tool-Context %q", ctx)
	}
}

func TestInvokeTypedBodyAndURLTarget(t *testing.T) {
	s, rec := startGateway(t)

	status, a := s.Invoke(t, "typed_body", `{"input":{"id":"${env.API_KEY}","n":12345678901234567890,"tags":["a","b"]},`+apitest.Who+`}`)
	if status != 200 || a.IsError {
		t.Fatalf("answer %d %+v", status, a)
	}
	got := rec.Get(t, "/items/")
	want := `{"key":"secret-key","label":"id=${env.API_KEY} n=12345678901234567890","lit":"${input.id}","n":12345678901234567890,"tags":["a","b"]}`
	if string(got.Body) != want {
		t.Errorf("body\n got %s\nwant %s", got.Body, want)
	}

	// A url target: no identity token, no context header, env from its
	// component, query encoded.
	status, a = s.Invoke(t, "ext_text", `{"input":{"q":"a b&c=d"}}`, "Authorization", "Bearer caller")
	if status != 200 || a.IsError || a.Content != "plain <b>text</b>" || a.Card != "" {
		t.Fatalf("answer %d %+v", status, a)
	}
	got = rec.Get(t, "/text")
	if got.Header.Get("Authorization") != "" || got.Header.Get("Kazzle-Tool-Context") != "" {
		t.Errorf("url target got Authorization %q, context %q", got.Header.Get("Authorization"), got.Header.Get("Kazzle-Tool-Context"))
	}
	if got.Query != "q=a+b%26c%3Dd" || got.Header.Get("X-Key") != "secret-key" {
		t.Errorf("query %q, X-Key %q", got.Query, got.Header.Get("X-Key"))
	}
}

func TestInvokeNormalization(t *testing.T) {
	s, _ := startGateway(t)
	for _, c := range []struct {
		tool     string
		isError  bool
		content  string // substring
		markdown string
		embed    string
		card     string
	}{
		{tool: "md", content: "saved", markdown: "**saved**", card: "markdown"},
		{tool: "both", content: "c", markdown: "m", embed: "https://app.example/card/1", card: "embed"},
		{tool: "from_manifest", content: "plain <b>text</b>"},
		{tool: "ext", content: "saved", markdown: "**saved**", card: "markdown"},
		{tool: "relative_embed", isError: true, content: "embedUrl"},
		{tool: "no_content", isError: true, content: `"content"`},
		{tool: "domain_error", isError: true, content: "404 Not Found: not_found: no bookmark b9"},
		{tool: "slow", isError: true, content: "did not answer within 300ms"},
		{tool: "big", isError: true, content: "larger than max_response_size (1048576 bytes)"},
		{tool: "cut", isError: true, content: "connection broke"},
	} {
		t.Run(c.tool, func(t *testing.T) {
			status, a := s.Invoke(t, c.tool, `{"input":{},`+apitest.Who+`}`)
			if status != 200 {
				t.Fatalf("status %d", status)
			}
			if a.IsError != c.isError || !strings.Contains(a.Content, c.content) ||
				a.Markdown != c.markdown || a.EmbedURL != c.embed || a.Card != c.card {
				t.Errorf("got %+v", a)
			}
		})
	}
}

func TestInvokeCallerMistakes(t *testing.T) {
	s, rec := startGateway(t)
	before := rec.Count()
	for _, c := range []struct {
		name   string
		tool   string
		body   string
		status int
		code   string
	}{
		{"unknown tool", "nope", `{"input":{}}`, 404, "unknown_tool"},
		{"not JSON", "save", `{"input":`, 400, "malformed_envelope"},
		{"unknown field", "save", `{"input":{},"inputs":{}}`, 400, "malformed_envelope"},
		{"trailing data", "save", `{"input":{}} {}`, 400, "malformed_envelope"},
		{"trailing brace", "save", `{"input":{}}}`, 400, "malformed_envelope"},
		{"repeated member", "save", `{"input":{"id":"1"},"input":{"id":"2"},` + apitest.Who + `}`, 400, "malformed_envelope"},
		{"name in another case", "save", `{"Input":{"id":"1"},` + apitest.Who + `}`, 400, "malformed_envelope"},
		{"not an object", "save", `[{"input":{}}]`, 400, "malformed_envelope"},
		{"bad context", "save", `{"input":{"id":"1"},"context":{"source":"thread"},` + apitest.Who + `}`, 400, "invalid_context"},
		{"unknown source", "save", `{"input":{"id":"1"},"context":{"source":"chat"},` + apitest.Who + `}`, 400, "invalid_context"},
		{"no identity for app", "save", `{"input":{"id":"1"}}`, 400, "identity_required"},
		{"bad call id", "save", `{"input":{"id":"1"},"callId":"a b",` + apitest.Who + `}`, 400, "invalid_call_id"},
		{"too large", "save", `{"input":{"id":"` + strings.Repeat("x", 70<<10) + `"}}`, 413, "too_large"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, a := s.Invoke(t, c.tool, c.body)
			if status != c.status || a.Error == nil || a.Error.Code != c.code || a.Error.Message == "" {
				t.Errorf("got %d %+v", status, a.Error)
			}
		})
	}
	// Tool failures the model reads: 200 with isError.
	for _, c := range []struct {
		name, body, want string
	}{
		{"invalid input", `{"input":{"n":"seven"},` + apitest.Who + `}`, "invalid input"},
		{"additional property", `{"input":{"id":"1","evil":true},` + apitest.Who + `}`, "evil"},
		{"missing reference", `{"input":{"id":"1"},` + apitest.Who + `}`, "reference ${input.n}"},
		{"header injection", `{"input":{"id":"1","n":1,"note":"a\r\nX-Evil: 1"},` + apitest.Who + `}`, "CR, LF or NUL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, a := s.Invoke(t, "save", c.body)
			if status != 200 || !a.IsError || !strings.Contains(a.Content, c.want) {
				t.Errorf("got %d %+v", status, a)
			}
		})
	}
	if n := rec.Count(); n != before {
		t.Errorf("the upstream saw %d requests for calls that must never reach it", n-before)
	}
}

// TestToolsListAndJWKS: the list holds every tool with its display name
// (the name by default), description and schema; another method is 405
// naming GET; the JWKS holds the one identity key. (That the key is kept
// in Caddy's storage across reloads, and that other paths go to the next
// handler, is the Caddy module's.)
func TestToolsListAndJWKS(t *testing.T) {
	s, _ := startGateway(t)

	resp, err := s.client.Get(s.URL + "/tools")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(raw)
	var list []struct {
		Name        string         `json:"name"`
		DisplayName string         `json:"displayName"`
		Description string         `json:"description"`
		InputSchema jsontext.Value `json:"input_schema"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("tools: %v: %s", err, body)
	}
	byName := map[string]int{}
	for i, l := range list {
		byName[l.Name] = i
	}
	if len(list) != 16 {
		t.Errorf("listed %d tools, want 16", len(list))
	}
	if s := list[byName["save"]]; s.DisplayName != "Save item" || s.Description != "Save an item." || !bytes.Contains(s.InputSchema, []byte(`"required":["id"]`)) {
		t.Errorf("save listed as %+v", s)
	}
	if s := list[byName["md"]]; s.DisplayName != "md" {
		t.Errorf("displayName default: %q", s.DisplayName)
	}

	req, _ := http.NewRequest(http.MethodDelete, s.URL+"/tools", nil)
	resp, err = s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET" {
		t.Errorf("DELETE /tools: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}

	if kid := s.JWKSKeys(t); len(kid) != 1 {
		t.Fatalf("jwks has %d keys", len(kid))
	}
}

// TestToolsListFormats: ?format=openai and ?format=anthropic give the list
// in those APIs' tool shapes, members and all (Anthropic's API refuses a
// member it does not know, such as displayName); another format is 400.
func TestToolsListFormats(t *testing.T) {
	s, _ := startGateway(t)
	get := func(format string) (int, string) {
		resp, body := s.Get(t, s.URL+"/tools?format="+format)
		return resp.StatusCode, body
	}
	save := func(body string, member func(map[string]jsontext.Value) map[string]jsontext.Value) map[string]jsontext.Value {
		var list []map[string]jsontext.Value
		if err := json.Unmarshal([]byte(body), &list); err != nil || len(list) != 16 {
			t.Fatalf("%v, %d tools: %s", err, len(list), body)
		}
		for _, e := range list {
			if m := member(e); string(m["name"]) == `"save"` {
				return e
			}
		}
		t.Fatalf("no save in %s", body)
		return nil
	}
	keys := func(m map[string]jsontext.Value) string {
		k := slices.Sorted(maps.Keys(m))
		return strings.Join(k, ",")
	}
	self := func(m map[string]jsontext.Value) map[string]jsontext.Value { return m }

	status, body := get("anthropic")
	a := save(body, self)
	if status != 200 || keys(a) != "description,input_schema,name" || string(a["description"]) != `"Save an item."` ||
		!bytes.Contains(a["input_schema"], []byte(`"required":["id"]`)) {
		t.Errorf("anthropic: %d %v", status, a)
	}

	status, body = get("openai")
	o := save(body, func(e map[string]jsontext.Value) map[string]jsontext.Value {
		var fn map[string]jsontext.Value
		_ = json.Unmarshal(e["function"], &fn)
		return fn
	})
	var fn map[string]jsontext.Value
	_ = json.Unmarshal(o["function"], &fn)
	if status != 200 || keys(o) != "function,type" || string(o["type"]) != `"function"` ||
		keys(fn) != "description,name,parameters" || !bytes.Contains(fn["parameters"], []byte(`"required":["id"]`)) {
		t.Errorf("openai: %d %v %v", status, o, fn)
	}

	if status, body := get("toolgate"); status != 200 || !strings.Contains(body, `"displayName":"Save item"`) {
		t.Errorf("toolgate: %d %s", status, body)
	}
	if status, body := get("gemini"); status != 400 || apitest.ErrCode(body) != "unknown_format" || !strings.Contains(body, "openai or anthropic") {
		t.Errorf("gemini: %d %s", status, body)
	}
}

func TestUpstreamDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := startServer(t, gatewayOptions(t, "http://"+addr))
	status, a := s.Invoke(t, "md", `{"input":{},`+apitest.Who+`}`)
	if status != 200 || !a.IsError || !strings.Contains(a.Content, "could not be reached") {
		t.Errorf("got %d %+v", status, a)
	}
}
