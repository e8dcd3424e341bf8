package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/apitest"
	"github.com/toolgate/toolgate/internal/manifest"
)

// governedOptions add a tool that always asks for approval and one limited
// to one call an hour per user, both on the recorder's /items/.
func governedOptions(t *testing.T, upstream string) options {
	o := gatewayOptions(t, upstream)
	o.sources = append(o.sources, manifest.Source{Name: "manifest governed.json", Tools: parseTools(t, `{"tools":[
{"name":"guarded_save","description":"Save, once approved.","input_schema":`+apitest.TestSchema+`,
 "target":{"type":"app","component":"api","method":"POST","path":"/items/${input.id}","body":"${input}"},
 "approval":{"title":"Save it?","description":"Saving needs your approval."}},
{"name":"guarded_note","description":"Note, once approved.","input_schema":{"type":"object","properties":{"id":{"type":"string","title":"Item"},"n":{"type":"integer","maximum":100},"note":{"type":"string","pattern":"^[a-z]+$"}},"required":["id"],"additionalProperties":false},
 "target":{"type":"app","component":"api","method":"POST","path":"/items/${input.id}","body":"${input}"},
 "approval":{"title":"Note it?"}},
{"name":"rare","description":"Once an hour.","input_schema":`+apitest.EmptySchema+`,
 "target":{"type":"app","component":"api","method":"GET","path":"/md"},"limits":["1/1h per user"]}]}`)})
	return o
}

// TestMCPApproval: over MCP an approval is an input request with Approve
// and Reject; approving runs the target once, which learns who approved;
// rejecting sends nothing.
func TestMCPApproval(t *testing.T) {
	rec := apitest.NewRecorder(t)
	s := startServer(t, governedOptions(t, rec.URL))
	e := &elicitor{}
	cs := apitest.MCPClient{Endpoint: s.URL + "/mcp", Elicit: e.handle}.Session(t)

	e.set(accept("approve"))
	before := rec.Count()
	res := apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "guarded_save", Arguments: map[string]any{"id": "a1"}, Meta: apitest.U1()})
	q := e.questions()
	if len(q) != 1 || !strings.Contains(q[0].Message, "Save it?") || !strings.Contains(apitest.Dump(q[0].RequestedSchema), `"const":"approve"`) ||
		!strings.Contains(apitest.Dump(q[0].RequestedSchema), `"const":"reject"`) {
		t.Fatalf("asked %s", apitest.Dump(q))
	}
	if res.IsError || rec.Count()-before != 1 {
		t.Fatalf("approve: %s, %d requests", apitest.Dump(res), rec.Count()-before)
	}
	got := rec.Get(t, "/items/")
	if got.Path != "/items/a1" || !strings.Contains(got.Header.Get("Kazzle-Tool-Context"), `"approval":{"by":"u_1"`) {
		t.Errorf("sent %s, context %q", got.Path, got.Header.Get("Kazzle-Tool-Context"))
	}

	e.set(accept("reject"))
	before = rec.Count()
	res = apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "guarded_save", Arguments: map[string]any{"id": "a2"}, Meta: apitest.U1()})
	if !res.IsError || !strings.Contains(apitest.ModelText(t, res), "rejected") || rec.Count() != before {
		t.Errorf("reject: %s, %d requests", apitest.Dump(res), rec.Count()-before)
	}
}

// TestQuotaRefusals: over a quota the Tools API answers 429 with
// Retry-After and the limit, MCP an error result saying when to retry, and
// nothing reaches the target.
func TestQuotaRefusals(t *testing.T) {
	rec := apitest.NewRecorder(t)
	s := startServer(t, governedOptions(t, rec.URL))
	if status, a := s.Invoke(t, "rare", `{"input":{},"identity":{"user":"u_1","install":"in_1"}}`); status != 200 || a.IsError {
		t.Fatalf("first call: %d %+v", status, a)
	}
	before := rec.Count()
	resp, err := http.Post(s.URL+"/tools/rare", "application/json", strings.NewReader(`{"input":{},"callId":"c2","identity":{"user":"u_1","install":"in_1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(raw)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "3600" || !strings.Contains(text, `"limit":"1/1h per user"`) ||
		!strings.Contains(text, `"code":"over_limit"`) || !strings.Contains(text, `"retryAfter":3600`) {
		t.Fatalf("over the limit: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), text)
	}
	if code, _ := s.GetCall(t, "/calls/c2?user=u_1&install=in_1"); code != http.StatusNotFound {
		t.Errorf("a refused call was recorded: %d", code)
	}
	cs := apitest.MCPClient{Endpoint: s.URL + "/mcp"}.Session(t)
	res := apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "rare", Arguments: map[string]any{}, Meta: apitest.U1()})
	if !res.IsError || !strings.Contains(apitest.ModelText(t, res), "retry in 3600 s") {
		t.Errorf("MCP over the limit: %s", apitest.Dump(res))
	}
	if rec.Count() != before {
		t.Errorf("refused calls reached the target %d times", rec.Count()-before)
	}
}

// TestMCPApprovalWithChanges: an input request for an approval whose
// input a form can hold offers its fields, filled in; changing them
// approves with changes, keeping them approves as it is, and a field the
// card did not offer, or a value the schema refuses, sends nothing.
func TestMCPApprovalWithChanges(t *testing.T) {
	t.Run("2025-11-25 elicitation", func(t *testing.T) { approvalWithChanges(t, "2025-11-25") })
	t.Run("2026-07-28 input_required", func(t *testing.T) { approvalWithChanges(t, "") })
}

func approvalWithChanges(t *testing.T, version string) {
	rec := apitest.NewRecorder(t)
	s := startServer(t, governedOptions(t, rec.URL))
	e := &elicitor{}
	cs := apitest.MCPClient{Endpoint: s.URL + "/mcp", Version: version, Elicit: e.handle}.Session(t)
	args := map[string]any{"id": "a1", "n": 7, "note": "first"}

	e.set(&mcp.ElicitResult{Action: "accept", Content: map[string]any{"button": "approve", "id": "a1", "n": 8, "note": "second"}})
	res := apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "guarded_note", Arguments: args, Meta: apitest.U1()})
	q := e.questions()
	if len(q) != 1 {
		t.Fatalf("asked %d times", len(q))
	}
	schema := apitest.Dump(q[0].RequestedSchema)
	for _, want := range []string{`"id":{"default":"a1","title":"Item","type":"string"}`, `"n":{"default":7,"maximum":100,"type":"integer"}`, `"note":{"default":"first","type":"string"}`} {
		if !strings.Contains(schema, want) {
			t.Errorf("requested schema %s has no %s", schema, want)
		}
	}
	if res.IsError {
		t.Fatalf("approve with changes: %s", apitest.Dump(res))
	}
	got := rec.Get(t, "/items/")
	if !strings.Contains(string(got.Body), `"n":8`) || !strings.Contains(string(got.Body), `"note":"second"`) ||
		!strings.Contains(got.Header.Get("Kazzle-Tool-Context"), `"changed":true`) {
		t.Errorf("sent %s, context %q", got.Body, got.Header.Get("Kazzle-Tool-Context"))
	}

	// The fields as they were: approved as it is.
	e.set(&mcp.ElicitResult{Action: "accept", Content: map[string]any{"button": "approve", "note": "first", "n": 7, "id": "a1"}})
	if res := apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "guarded_note", Arguments: args, Meta: apitest.U1()}); res.IsError {
		t.Fatalf("approve unchanged: %s", apitest.Dump(res))
	}
	if ctx := rec.Get(t, "/items/").Header.Get("Kazzle-Tool-Context"); !strings.Contains(ctx, `"changed":false`) {
		t.Errorf("unchanged fields: context %q", ctx)
	}

	before := rec.Count()
	for _, content := range []map[string]any{
		{"button": "approve", "id": "a1", "role": "admin"},
		{"button": "approve", "id": "a1", "note": "SECOND!"}, // the form has no pattern; the tool's schema has
	} {
		e.set(&mcp.ElicitResult{Action: "accept", Content: content})
		res := apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "guarded_note", Arguments: args, Meta: apitest.U1()})
		if !res.IsError {
			t.Errorf("answer %v: %s", content, apitest.Dump(res))
		}
	}
	if rec.Count() != before {
		t.Errorf("refused answers reached the target %d times", rec.Count()-before)
	}
}

// TestWaitingWithCallers: with callers the token decides whose calls are
// listed and answered; a query naming another user, or another user's
// token, sees and answers nothing, and nothing is sent.
func TestWaitingWithCallers(t *testing.T) {
	rec := apitest.NewRecorder(t)
	p := apitest.NewPlatform(t, "k1")
	o := callersOptions(t, rec.URL, p.URL)
	o.sources = append(o.sources, manifest.Source{Name: "manifest governed.json", Tools: parseTools(t, `{"tools":[
{"name":"guarded","description":"Asks first.","input_schema":{"type":"object"},"target":{"type":"app","component":"api","method":"GET","path":"/md"},
 "approval":{"title":"Go on?"}}]}`)})
	s := startServer(t, o)
	alice := "Bearer " + p.Token(t, "k1", apitest.GoodClaims("u_7", "user"))
	mallory := "Bearer " + p.Token(t, "k1", apitest.GoodClaims("u_8", "user"))
	send := func(method, path, auth, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, s.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := s.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := send("POST", "/tools/guarded", alice, `{"input":{},"callId":"w1","context":{"source":"thread","threadId":"th"}}`); code != 200 || !strings.Contains(body, `"action_required"`) {
		t.Fatalf("alice's call: %d %s", code, body)
	}
	before := rec.Count()
	for _, c := range []struct{ name, method, path, auth, body, want string }{
		{"no token", "GET", "/waiting", "", "", "401"},
		{"another user's token naming alice", "GET", "/waiting?user=u_7", mallory, "", `200 {"calls":[]}`},
		{"another user's token answering", "POST", "/calls/w1/resume", mallory, `{"buttonId":"approve"}`, "404"},
		{"another user's token, an identity in the body", "POST", "/calls/w1/resume", mallory, `{"buttonId":"approve","identity":{"user":"u_7"}}`, "404"},
	} {
		code, body := send(c.method, c.path, c.auth, c.body)
		if got := fmt.Sprint(code) + " " + body; !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: %s; want %s", c.name, got, c.want)
		}
	}
	if rec.Count() != before {
		t.Fatalf("refused answers reached the target %d times", rec.Count()-before)
	}
	if code, body := send("GET", "/waiting", alice, ""); code != 200 || !strings.Contains(body, `"callId":"w1"`) {
		t.Errorf("alice's list: %d %s", code, body)
	}
}
