package httpapi

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/apitest"
	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/manifest"
)

// startMCPGateway serves gatewayOptions and one more manifest: a tool with
// MCP annotations.
func startMCPGateway(t *testing.T) (*server, *apitest.Recorder) {
	rec := apitest.NewRecorder(t)
	return startServer(t, mcpOptions(t, rec.URL)), rec
}

func mcpOptions(t *testing.T, upstream string) options {
	t.Helper()
	o := gatewayOptions(t, upstream)
	o.sources = append(o.sources, manifest.Source{Name: "manifest annotated.json", Tools: parseTools(t, apitest.AnnotatedManifest)})
	return o
}

func withMeta(m mcp.Meta, kv ...any) mcp.Meta {
	out := mcp.Meta{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

func TestMCPToolsList(t *testing.T) {
	s, _ := startMCPGateway(t)
	cs := apitest.MCPClient{Endpoint: s.URL + "/mcp"}.Session(t)
	tools := apitest.ListTools(t, cs)
	if len(tools) != 17 {
		t.Errorf("listed %d tools, want the 16 of testConfig and annotated", len(tools))
	}
	save := tools["save"]
	if save == nil {
		t.Fatalf("save not listed: %v", tools)
	}
	if save.Title != "Save item" || save.Description != "Save an item." {
		t.Errorf("save: title %q, description %q", save.Title, save.Description)
	}
	schema := apitest.Dump(save.InputSchema)
	if !strings.Contains(schema, `"required":["id"]`) || !strings.Contains(schema, `"additionalProperties":false`) {
		t.Errorf("save input schema %s", schema)
	}
	if save.Annotations != nil {
		t.Errorf("save has annotations %s though the config gives none", apitest.Dump(save.Annotations))
	}
	if fm := tools["from_manifest"]; fm == nil || fm.Title != "From manifest" {
		t.Errorf("from_manifest: %s", apitest.Dump(fm))
	}
	card := tools["card"]
	if card == nil || !strings.Contains(apitest.Dump(card.InputSchema), `"required":["kind"]`) {
		t.Errorf("card: %s", apitest.Dump(card))
	}
	a := tools["annotated"]
	if a == nil || a.Title != "Annotated tool" || a.Annotations == nil {
		t.Fatalf("annotated: %s", apitest.Dump(a))
	}
	ann := a.Annotations
	if !ann.ReadOnlyHint || !ann.IdempotentHint || ann.DestructiveHint == nil || *ann.DestructiveHint || ann.OpenWorldHint == nil || *ann.OpenWorldHint {
		t.Errorf("annotated hints %s, want readOnly, idempotent, not destructive, closed world", apitest.Dump(ann))
	}

	// The older revision lists the same.
	old := apitest.MCPClient{Endpoint: s.URL + "/mcp", Version: "2025-11-25"}.Session(t)
	if n := len(apitest.ListTools(t, old)); n != len(tools) {
		t.Errorf("2025-11-25 lists %d tools, 2026-07-28 %d", n, len(tools))
	}
}

func TestMCPCallResults(t *testing.T) {
	s, rec := startMCPGateway(t)
	cs := apitest.MCPClient{Endpoint: s.URL + "/mcp"}.Session(t)

	res := apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "get_item", Arguments: map[string]any{"id": "b1"}, Meta: apitest.U1()})
	if res.IsError || len(res.Content) != 1 || apitest.ModelText(t, res) != "ok" {
		t.Errorf("get_item: %s", apitest.Dump(res))
	}

	res = apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "md", Arguments: map[string]any{}, Meta: apitest.U1()})
	if res.IsError || len(res.Content) != 2 || apitest.ModelText(t, res) != "saved" {
		t.Fatalf("md: %s", apitest.Dump(res))
	}
	if md, ok := res.Content[1].(*mcp.TextContent); !ok || md.Text != "**saved**" || md.Annotations == nil || !slices.Equal(md.Annotations.Audience, []mcp.Role{"user"}) {
		t.Errorf("md's markdown item: %s", apitest.Dump(res.Content[1]))
	}

	res = apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "both", Arguments: map[string]any{}, Meta: apitest.U1()})
	if res.IsError || apitest.ModelText(t, res) != "c" {
		t.Fatalf("both: %s", apitest.Dump(res))
	}
	var link *mcp.ResourceLink
	var userText int
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.ResourceLink:
			link = c
		case *mcp.TextContent:
			if c.Annotations != nil && slices.Equal(c.Annotations.Audience, []mcp.Role{"user"}) && c.Text == "m" {
				userText++
			}
		}
	}
	if link == nil || link.URI != "https://app.example/card/1" || userText != 1 || len(res.Content) != 3 {
		t.Errorf("both: want the text, the markdown for the user and a resource_link, got %s", apitest.Dump(res))
	}

	// Failures are results the model reads, input validation included, and
	// reach nothing.
	before := rec.Count()
	res = apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "save", Arguments: map[string]any{"n": "seven"}, Meta: apitest.U1()})
	if !res.IsError || !strings.Contains(apitest.ModelText(t, res), "invalid input") {
		t.Errorf("invalid input: %s", apitest.Dump(res))
	}
	res = apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "save", Arguments: map[string]any{"id": "1", "evil": true}, Meta: apitest.U1()})
	if !res.IsError || !strings.Contains(apitest.ModelText(t, res), "evil") {
		t.Errorf("additional property: %s", apitest.Dump(res))
	}
	if n := rec.Count() - before; n != 0 {
		t.Errorf("invalid input reached the upstream %d times", n)
	}
	res = apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "domain_error", Arguments: map[string]any{}, Meta: apitest.U1()})
	if !res.IsError || !strings.Contains(apitest.ModelText(t, res), "no bookmark b9") {
		t.Errorf("domain_error: %s", apitest.Dump(res))
	}
	// An app tool without any identity is a tool failure too.
	res = apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "md", Arguments: map[string]any{}})
	if !res.IsError {
		t.Errorf("app call without identity: %s", apitest.Dump(res))
	}

	// An unknown tool is a protocol error.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "nope", Arguments: map[string]any{}}); err == nil {
		t.Errorf("unknown tool: no protocol error, result %s", apitest.Dump(res))
	}
}

func TestMCPIdentityAndContext(t *testing.T) {
	s, rec := startMCPGateway(t)
	plain := apitest.MCPClient{Endpoint: s.URL + "/mcp"}.Session(t)

	// The identity in _meta reaches the component; a client without
	// elicitation makes an api call.
	res := apitest.CallTool(t, plain, &mcp.CallToolParams{Name: "md", Arguments: map[string]any{}, Meta: apitest.U1()})
	if res.IsError {
		t.Fatalf("md: %s", apitest.Dump(res))
	}
	got := rec.Get(t, "/md")
	claims := s.VerifyWithJWKS(t, strings.TrimPrefix(got.Header.Get("Authorization"), "Bearer "))
	if claims["sub"] != "u_1" || claims["install"] != "in_1" {
		t.Errorf("the component was told %v, want u_1/in_1", claims)
	}
	if ctx := got.Header.Get("Kazzle-Tool-Context"); ctx != `{"source":"api"}` {
		t.Errorf("client without elicitation: Kazzle-Tool-Context %q, want api", ctx)
	}
	// On an api call a card is a failure, not an input request.
	res = apitest.CallTool(t, plain, &mcp.CallToolParams{Name: "card", Arguments: map[string]any{"kind": "plain"}, Meta: apitest.U1()})
	if !res.IsError || res.NeedsInput() || !strings.Contains(apitest.ModelText(t, res), "api call") {
		t.Errorf("card on an api call: %s", apitest.Dump(res))
	}

	// toolgate/threadId makes a thread call.
	res = apitest.CallTool(t, plain, &mcp.CallToolParams{Name: "md", Arguments: map[string]any{}, Meta: withMeta(apitest.U1(), "toolgate/threadId", "th_m")})
	if res.IsError {
		t.Fatalf("md in a thread: %s", apitest.Dump(res))
	}
	if ctx := rec.Get(t, "/md").Header.Get("Kazzle-Tool-Context"); ctx != `{"source":"thread","threadId":"th_m"}` {
		t.Errorf("threadId in _meta: Kazzle-Tool-Context %q", ctx)
	}

	// A session client that declared elicitation: a thread of its session.
	never := func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return nil, fmt.Errorf("not expected")
	}
	old := apitest.MCPClient{Endpoint: s.URL + "/mcp", Version: "2025-11-25", Elicit: never}.Session(t)
	if old.ID() == "" {
		t.Fatal("2025-11-25 session has no id")
	}
	apitest.CallTool(t, old, &mcp.CallToolParams{Name: "md", Arguments: map[string]any{}, Meta: apitest.U1()})
	if ctx := rec.Get(t, "/md").Header.Get("Kazzle-Tool-Context"); ctx != `{"source":"thread","threadId":"mcp-`+old.ID()+`"}` {
		t.Errorf("elicitation-capable session: Kazzle-Tool-Context %q, want the session's thread", ctx)
	}

	// A sessionless client that declared elicitation: a thread per call.
	latest := apitest.MCPClient{Endpoint: s.URL + "/mcp", Elicit: never}.Session(t)
	apitest.CallTool(t, latest, &mcp.CallToolParams{Name: "md", Arguments: map[string]any{}, Meta: apitest.U1()})
	if ctx := rec.Get(t, "/md").Header.Get("Kazzle-Tool-Context"); !strings.HasPrefix(ctx, `{"source":"thread","threadId":"mcp-call_`) {
		t.Errorf("elicitation-capable sessionless client: Kazzle-Tool-Context %q, want a thread of its own", ctx)
	}

	// toolgate/callId: a repeat is answered from the ledger.
	meta := withMeta(apitest.U1(), "toolgate/callId", "mcp_once_1")
	first := apitest.CallTool(t, plain, &mcp.CallToolParams{Name: "md", Arguments: map[string]any{}, Meta: meta})
	before := rec.Count()
	again := apitest.CallTool(t, plain, &mcp.CallToolParams{Name: "md", Arguments: map[string]any{}, Meta: meta})
	if first.IsError || apitest.Dump(first.Content) != apitest.Dump(again.Content) {
		t.Errorf("repeat: %s, first %s", apitest.Dump(again), apitest.Dump(first))
	}
	if n := rec.Count() - before; n != 0 {
		t.Errorf("a repeated callId reached the upstream %d times", n)
	}
	if key := rec.Get(t, "/md").Header.Get("Idempotency-Key"); key != dispatch.IdempotencyKey("u_1", "in_1", "mcp_once_1") {
		t.Errorf("Idempotency-Key %q, want the _meta call id", key)
	}
	// Without a callId, each tools/call is its own call.
	before = rec.Count()
	apitest.CallTool(t, plain, &mcp.CallToolParams{Name: "md", Arguments: map[string]any{}, Meta: apitest.U1()})
	apitest.CallTool(t, plain, &mcp.CallToolParams{Name: "md", Arguments: map[string]any{}, Meta: apitest.U1()})
	if n := rec.Count() - before; n != 2 {
		t.Errorf("two calls without a callId ran the target %d times", n)
	}
}

// elicitor answers every elicitation with one fixed answer and records
// what it was asked.
type elicitor struct {
	mu     sync.Mutex
	answer *mcp.ElicitResult
	asked  []*mcp.ElicitParams
}

func (e *elicitor) handle(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.asked = append(e.asked, req.Params)
	return e.answer, nil
}

func (e *elicitor) set(a *mcp.ElicitResult) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.answer, e.asked = a, nil
}

func (e *elicitor) questions() []*mcp.ElicitParams {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.asked)
}

// checkCardForm checks the elicitation a "plain" card makes.
func checkCardForm(t *testing.T, p *mcp.ElicitParams) {
	t.Helper()
	if p.Mode != "" && p.Mode != "form" {
		t.Errorf("mode %q", p.Mode)
	}
	if !strings.Contains(p.Message, "Send the email?") || !strings.Contains(p.Message, "To ada@example.com") {
		t.Errorf("message %q", p.Message)
	}
	var schema struct {
		Type       string `json:"type"`
		Properties map[string]struct {
			Type  string              `json:"type"`
			OneOf []map[string]string `json:"oneOf"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal([]byte(apitest.Dump(p.RequestedSchema)), &schema); err != nil {
		t.Fatalf("requestedSchema %s: %v", apitest.Dump(p.RequestedSchema), err)
	}
	button, ok := schema.Properties["button"]
	if schema.Type != "object" || len(schema.Properties) != 1 || !ok || button.Type != "string" || !slices.Equal(schema.Required, []string{"button"}) {
		t.Errorf("requestedSchema %s", apitest.Dump(p.RequestedSchema))
	}
	want := []map[string]string{{"const": "approve", "title": "Send"}, {"const": "reject", "title": "Don't send"}, {"const": "run", "title": "Run"}}
	if apitest.Dump(button.OneOf) != apitest.Dump(want) {
		t.Errorf("button choices %s, want %s", apitest.Dump(button.OneOf), apitest.Dump(want))
	}
}

func accept(button string) *mcp.ElicitResult {
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"button": button}}
}

// cardAnswers runs the three answers to a card through an automatic
// client: elicitation during the call (2025-11-25) or the input_required
// round trip (2026-07-28).
func cardAnswers(t *testing.T, s *server, rec *apitest.Recorder, version string) {
	e := &elicitor{}
	cs := apitest.MCPClient{Endpoint: s.URL + "/mcp", Version: version, Elicit: e.handle}.Session(t)
	if version == "2025-11-25" && cs.ID() == "" {
		t.Error("2025-11-25 has no session: elicitation/create needs one")
	}
	args := map[string]any{"kind": "plain"}

	e.set(accept("approve"))
	res := apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "card", Arguments: args, Meta: apitest.U1()})
	q := e.questions()
	if len(q) != 1 {
		t.Fatalf("the client was asked %d times, want once (result %s)", len(q), apitest.Dump(res))
	}
	checkCardForm(t, q[0])
	if res.IsError || res.NeedsInput() || apitest.ModelText(t, res) != "approved" {
		t.Fatalf("approve: %s", apitest.Dump(res))
	}
	if len(res.Content) != 2 || res.Content[1].(*mcp.TextContent).Text != "**approved**" {
		t.Errorf("approve: want the markdown item, got %s", apitest.Dump(res))
	}

	e.set(&mcp.ElicitResult{Action: "decline"})
	res = apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "card", Arguments: args, Meta: apitest.U1()})
	if res.IsError || !strings.Contains(apitest.ModelText(t, res), "skipped") || len(e.questions()) != 1 {
		t.Errorf("decline: %s", apitest.Dump(res))
	}

	e.set(&mcp.ElicitResult{Action: "cancel"})
	res = apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "card", Arguments: args, Meta: apitest.U1()})
	if !res.IsError || !strings.Contains(apitest.ModelText(t, res), "cancelled") || len(e.questions()) != 1 {
		t.Errorf("cancel: %s", apitest.Dump(res))
	}

	// A button with a target runs it, in the call's thread and identity.
	e.set(accept("run"))
	res = apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "card", Arguments: args, Meta: withMeta(apitest.U1(), "toolgate/threadId", "th_run")})
	if res.IsError || apitest.ModelText(t, res) != "ok" {
		t.Fatalf("run: %s", apitest.Dump(res))
	}
	got := rec.Get(t, "/items/")
	if got.Method != "POST" || got.Path != "/items/z9" || string(got.Body) != `{"id":"z9"}` || got.Header.Get("Kazzle-Tool-Context") != `{"source":"thread","threadId":"th_run"}` {
		t.Errorf("button target sent %s %s %s context %q", got.Method, got.Path, got.Body, got.Header.Get("Kazzle-Tool-Context"))
	}
}

func TestMCPCards(t *testing.T) {
	s, rec := startMCPGateway(t)
	t.Run("2025-11-25 elicitation", func(t *testing.T) { cardAnswers(t, s, rec, "2025-11-25") })
	t.Run("2026-07-28 input_required", func(t *testing.T) { cardAnswers(t, s, rec, "") })
}

func TestMCPRoundTripByHand(t *testing.T) {
	s, _ := startMCPGateway(t)
	e := &elicitor{}
	cs := apitest.MCPClient{Endpoint: s.URL + "/mcp", Elicit: e.handle, NoRoundTrip: true}.Session(t)
	args := map[string]any{"kind": "plain"}

	ask := func(meta mcp.Meta) *mcp.CallToolResult {
		t.Helper()
		res := apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "card", Arguments: args, Meta: meta})
		if !res.NeedsInput() || res.RequestState == "" || len(res.Content) != 0 || res.IsError {
			t.Fatalf("want an input_required result, got %s (needs input %v)", apitest.Dump(res), res.NeedsInput())
		}
		p, ok := res.InputRequests["card"].(*mcp.ElicitParams)
		if !ok || len(res.InputRequests) != 1 {
			t.Fatalf("input requests %s", apitest.Dump(res.InputRequests))
		}
		checkCardForm(t, p)
		return res
	}
	answer := func(meta mcp.Meta, state string, a *mcp.ElicitResult) *mcp.CallToolResult {
		t.Helper()
		return apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "card", Arguments: args, Meta: meta,
			InputResponses: mcp.InputResponseMap{"card": a}, RequestState: state})
	}

	first := ask(apitest.U1())
	res := answer(apitest.U1(), first.RequestState, accept("approve"))
	if res.IsError || res.NeedsInput() || apitest.ModelText(t, res) != "approved" {
		t.Fatalf("answered by hand: %s", apitest.Dump(res))
	}
	if len(e.questions()) != 0 {
		t.Error("the handler was called though the round trip is disabled")
	}
	// Usable once.
	res = answer(apitest.U1(), first.RequestState, accept("approve"))
	if !res.IsError || !strings.Contains(apitest.ModelText(t, res), "already used") {
		t.Errorf("reused state: %s", apitest.Dump(res))
	}

	// Tampered: a later expiry under the old signature.
	second := ask(apitest.U1())
	parts := strings.Split(second.RequestState, ".")
	if len(parts) != 3 {
		t.Fatalf("state %q is not a JWT", second.RequestState)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatalf("state body: %v", err)
	}
	var st map[string]any
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatalf("state body: %v", err)
	}
	st["exp"] = st["exp"].(float64) + 3600
	raw, _ = json.Marshal(st)
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(raw) + "." + parts[2]
	res = answer(apitest.U1(), tampered, accept("approve"))
	if !res.IsError || !strings.Contains(apitest.ModelText(t, res), "does not verify") {
		t.Errorf("tampered state: %s", apitest.Dump(res))
	}
	res = answer(apitest.U1(), "garbage", accept("approve"))
	if !res.IsError {
		t.Errorf("garbage state: %s", apitest.Dump(res))
	}

	// Another caller's state is refused and not spent: its owner can still
	// answer.
	u2 := mcp.Meta{"toolgate/identity": map[string]any{"user": "u_2", "install": "in_1"}}
	res = answer(u2, second.RequestState, accept("approve"))
	if !res.IsError || !strings.Contains(apitest.ModelText(t, res), "another caller") {
		t.Errorf("another caller's state: %s", apitest.Dump(res))
	}
	res = answer(apitest.U1(), second.RequestState, &mcp.ElicitResult{Action: "decline"})
	if res.IsError || !strings.Contains(apitest.ModelText(t, res), "skipped") {
		t.Errorf("the owner after a refused stranger: %s", apitest.Dump(res))
	}
}

func TestMCPCallers(t *testing.T) {
	rec := apitest.NewRecorder(t)
	p := apitest.NewPlatform(t, "k1")
	s := startCallers(t, rec.URL, p.URL)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	before := rec.Count()
	refused := func(o apitest.MCPClient, what string) {
		t.Helper()
		o.Endpoint = s.URL + "/mcp"
		cs, err := o.Connect(ctx)
		if err == nil {
			cs.Close()
			t.Errorf("connected %s", what)
		} else if !strings.Contains(err.Error(), "401") && !strings.Contains(err.Error(), "nauthorized") {
			t.Errorf("connect %s: %v, want a 401", what, err)
		}
	}
	refused(apitest.MCPClient{}, "without a token")
	refused(apitest.MCPClient{Token: p.Token(t, "k-unknown", apitest.GoodClaims("u_7", "user"))}, "with a token of an unknown key")
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Errorf("no token: %v %v, want 401", resp, err)
	} else {
		resp.Body.Close()
	}

	names := func(cs *mcp.ClientSession) string {
		var out []string
		for n := range apitest.ListTools(t, cs) {
			out = append(out, n)
		}
		slices.Sort(out)
		return strings.Join(out, ",")
	}
	user := apitest.MCPClient{Endpoint: s.URL + "/mcp", Token: p.Token(t, "k1", apitest.GoodClaims("u_7", "user"))}.Session(t)
	admin := apitest.MCPClient{Endpoint: s.URL + "/mcp", Token: p.Token(t, "k1", apitest.GoodClaims("u_8", "admin"))}.Session(t)
	if got := names(user); got != "bookmark,open,small" {
		t.Errorf("user lists %s", got)
	}
	if got := names(admin); got != "admin_only,bookmark,open,small" {
		t.Errorf("admin lists %s", got)
	}
	if got := names(apitest.MCPClient{Endpoint: s.URL + "/mcp", Version: "2025-11-25", Token: p.Token(t, "k1", apitest.GoodClaims("u_7", "user"))}.Session(t)); got != "bookmark,open,small" {
		t.Errorf("user lists %s over 2025-11-25", got)
	}
	if rec.Count() != before {
		t.Error("listing or refused connects reached the upstream")
	}
	// The policy applies to calls too.
	res := apitest.CallTool(t, user, &mcp.CallToolParams{Name: "admin_only", Arguments: map[string]any{}})
	if !res.IsError || rec.Count() != before {
		t.Errorf("user calling admin_only: %s", apitest.Dump(res))
	}
	// The identity is the token's, never _meta's.
	res = apitest.CallTool(t, admin, &mcp.CallToolParams{Name: "admin_only", Arguments: map[string]any{},
		Meta: mcp.Meta{"toolgate/identity": map[string]any{"user": "someone_else"}}})
	if res.IsError || apitest.ModelText(t, res) != "saved" {
		t.Fatalf("admin calling admin_only: %s", apitest.Dump(res))
	}
	claims := s.VerifyWithJWKS(t, strings.TrimPrefix(rec.Get(t, "/md").Header.Get("Authorization"), "Bearer "))
	if claims["sub"] != "u_8" || claims["install"] != "in_9" {
		t.Errorf("the component was told %v, want the token's u_8/in_9", claims)
	}
}

// mcpHostStatus posts an initialize with the given Host header.
func mcpHostStatus(t *testing.T, s *server, host string) (int, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/mcp", strings.NewReader(body))
	req.Host = host
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("Host %s: %v", host, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestMCPHostCheck: the server answers any Host (as a Caddy site behind a
// proxy that forwards its own does), so the gateway's check is what
// refuses a foreign one on the loopback listener.
func TestMCPHostCheck(t *testing.T) {
	start := func(allowedHosts ...string) *server {
		o := mcpOptions(t, apitest.NewRecorder(t).URL)
		o.api.AllowedHosts = allowedHosts
		return startServer(t, o)
	}
	isMCP := func(status int, body string) bool {
		return status == http.StatusOK && strings.Contains(body, `"serverInfo"`) && strings.Contains(body, `"toolgate"`)
	}

	s := start()
	for _, h := range []string{"evil.example", "evil.example:9080"} {
		if status, body := mcpHostStatus(t, s, h); status != http.StatusForbidden || !strings.Contains(body, "allowed_hosts") {
			t.Errorf("Host %s on loopback: %d %s, want 403", h, status, body)
		}
	}
	for _, h := range []string{"127.0.0.1:9080", "localhost:9080", "[::1]:9080"} {
		if status, body := mcpHostStatus(t, s, h); !isMCP(status, body) {
			t.Errorf("Host %s: %d %s, want the MCP initialize result", h, status, body)
		}
	}

	s = start("evil.example")
	if status, body := mcpHostStatus(t, s, "evil.example"); status == http.StatusForbidden || !isMCP(status, body) {
		t.Errorf("Host evil.example in allowed_hosts: %d %s", status, body)
	}
	if status, _ := mcpHostStatus(t, s, "other.example"); status != http.StatusForbidden {
		t.Errorf("Host other.example not in allowed_hosts: %d, want 403", status)
	}
}

// TestMCPCardWithoutElicitation: a thread call from a client that cannot
// answer input requests gets a tool failure, not a protocol error.
func TestMCPCardWithoutElicitation(t *testing.T) {
	s, _ := startMCPGateway(t)
	for _, version := range []string{"2025-11-25", ""} {
		cs := apitest.MCPClient{Endpoint: s.URL + "/mcp", Version: version}.Session(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "card", Arguments: map[string]any{"kind": "plain"},
			Meta: withMeta(apitest.U1(), "toolgate/threadId", "th_ne")})
		cancel()
		if err != nil {
			t.Errorf("version %q: protocol error %v", version, err)
			continue
		}
		if !res.IsError || res.NeedsInput() || !strings.Contains(apitest.ModelText(t, res), "elicitation") {
			t.Errorf("version %q: %s", version, apitest.Dump(res))
		}
	}
}

// TestMCPBadCallID: a _meta call id is checked as the Tools API checks an
// envelope's: a malformed one is a malformed request and reaches nothing.
func TestMCPBadCallID(t *testing.T) {
	s, rec := startMCPGateway(t)
	cs := apitest.MCPClient{Endpoint: s.URL + "/mcp"}.Session(t)
	before := rec.Count()
	for _, id := range []any{"a b", "a\r\nX-Evil: 1", strings.Repeat("x", 300), "é", 42} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "md", Arguments: map[string]any{}, Meta: withMeta(apitest.U1(), "toolgate/callId", id)})
		cancel()
		if err == nil || !strings.Contains(err.Error(), "callId") {
			t.Errorf("callId %v: %v %s, want a protocol error naming the callId", id, err, apitest.Dump(res))
		}
	}
	if n := rec.Count() - before; n != 0 {
		t.Errorf("calls with malformed call ids reached the upstream %d times", n)
	}
}

// TestMCPClientTool runs a kazzle target over MCP: the call names its
// thread, and that thread's page answers it.
func TestMCPClientTool(t *testing.T) {
	s := startPages(t)
	stream, status, body := apitest.OpenStream(t, s.URL, apitest.PageToken(t, "u_1", "th_mcp"), "th_mcp")
	if stream == nil {
		t.Fatalf("stream: %d %s", status, body)
	}
	defer stream.Close()
	cs := apitest.MCPClient{Endpoint: s.URL + "/mcp"}.Session(t)
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		done <- apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "where", Arguments: map[string]any{"q": "pos"},
			Meta: withMeta(mcp.Meta{"toolgate/identity": map[string]any{"user": "u_1"}}, "toolgate/threadId", "th_mcp")})
	}()
	offer := stream.Next(t)
	if offer.Name != "video_position" || string(offer.Input) != `{"q":"pos"}` {
		t.Fatalf("offer %+v", offer)
	}
	if status, body := s.Claim(t, apitest.PageToken(t, "u_1", "th_mcp"), offer.CallID); status != 200 {
		t.Fatalf("claim: %d %s", status, body)
	}
	if status, body := s.PostResult(t, apitest.PageToken(t, "u_1", "th_mcp"), offer.CallID, `{"result":{"positionSeconds":83}}`); status != 200 {
		t.Fatalf("result: %d %s", status, body)
	}
	res := <-done
	if res.IsError || apitest.ModelText(t, res) != `{"positionSeconds":83}` {
		t.Errorf("client tool over MCP: %s", apitest.Dump(res))
	}

	// Without a thread a client tool is an error result, not a wait.
	res = apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "where", Arguments: map[string]any{},
		Meta: mcp.Meta{"toolgate/identity": map[string]any{"user": "u_1"}}})
	if !res.IsError || apitest.ModelText(t, res) != "client tools need a thread" {
		t.Errorf("client tool without a thread: %s", apitest.Dump(res))
	}
}
