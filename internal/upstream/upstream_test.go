package upstream_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/result"
	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

func TestMain(m *testing.M) {
	upstreamtest.ServeStdioIfAsked()
	os.Exit(m.Run())
}

// authorization is a stand-in signer: the header names who and for whom.
func authorization(user, install, aud string) (string, error) {
	return "Bearer " + user + "@" + install + "->" + aud, nil
}

func start(t *testing.T, cfg upstream.Config, changed func(*upstream.Server)) *upstream.Server {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "crm"
	}
	s, err := upstream.New(cfg, upstream.Options{Authorization: authorization, Changed: changed, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return s
}

func call(s *upstream.Server, tool, args string) dispatch.Outcome {
	return s.Call(context.Background(), dispatch.MCPCall{Tool: tool, Arguments: jsontext.Value(args), User: "u1", Install: "i1", IdempotencyKey: "key-1"})
}

func names(s *upstream.Server) []string {
	tools, _ := s.Tools()
	var out []string
	for _, t := range tools {
		out = append(out, t.Name)
	}
	slices.Sort(out)
	return out
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestConfigCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  upstream.Config
		err  string
	}{
		{"https", upstream.Config{Name: "a", URL: "https://crm.example/mcp"}, ""},
		{"http loopback", upstream.Config{Name: "a", URL: "http://127.0.0.1:9/mcp"}, ""},
		{"http localhost", upstream.Config{Name: "a", URL: "http://localhost:9/mcp"}, ""},
		{"unix", upstream.Config{Name: "a", URL: "unix///run/crm.sock"}, ""},
		{"command", upstream.Config{Name: "a", Command: []string{"node", "server.js"}, Env: map[string]string{"K": "v"}}, ""},
		{"http elsewhere", upstream.Config{Name: "a", URL: "http://crm.example/mcp"}, "http only to a loopback address"},
		{"http private", upstream.Config{Name: "a", URL: "http://10.0.0.5/mcp"}, "http only to a loopback address"},
		{"http to a name like loopback", upstream.Config{Name: "a", URL: "http://127.0.0.1.evil.example/mcp"}, "http only to a loopback address"},
		{"ftp", upstream.Config{Name: "a", URL: "ftp://crm.example/"}, "must be https"},
		{"user info", upstream.Config{Name: "a", URL: "https://u:p@crm.example/"}, "no user info"},
		{"relative unix", upstream.Config{Name: "a", URL: "unix//run/crm.sock"}, "must be absolute"},
		{"neither", upstream.Config{Name: "a"}, "give a URL or a command"},
		{"both", upstream.Config{Name: "a", URL: "https://x.example", Command: []string{"x"}}, "not both"},
		{"bad name", upstream.Config{Name: "a b", URL: "https://x.example"}, "the name must match"},
		{"bad prefix", upstream.Config{Name: "a", URL: "https://x.example", Prefix: "a.b"}, "prefix"},
		{"reserved header", upstream.Config{Name: "a", URL: "https://x.example", Headers: map[string]string{"Mcp-Session-Id": "x"}}, "transport's or the protocol's"},
		{"bad header value", upstream.Config{Name: "a", URL: "https://x.example", Headers: map[string]string{"X-Key": "a\nb"}}, "invalid value"},
		{"authorization and identity", upstream.Config{Name: "a", URL: "https://x.example", Identity: true, Headers: map[string]string{"authorization": "Bearer x"}}, "identity sends one already"},
		{"identity on a command", upstream.Config{Name: "a", Command: []string{"x"}, Identity: true}, "a command has none"},
		{"connection on a command", upstream.Config{Name: "a", Command: []string{"x"}, Connection: "gmail"}, "a command has none"},
		{"connection and identity", upstream.Config{Name: "a", URL: "https://x.example", Identity: true, Connection: "gmail"}, "choose one"},
		{"authorization and connection", upstream.Config{Name: "a", URL: "https://x.example", Connection: "gmail", Headers: map[string]string{"Authorization": "Bearer x"}}, "the connection sends one already"},
		{"headers on a command", upstream.Config{Name: "a", Command: []string{"x"}, Headers: map[string]string{"X": "y"}}, "headers are for a URL"},
		{"env on a URL", upstream.Config{Name: "a", URL: "https://x.example", Env: map[string]string{"X": "y"}}, "env and dir are for a command"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.Check()
			switch {
			case c.err == "" && err != nil:
				t.Fatalf("Check: %v", err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Fatalf("Check: %v, want %q", err, c.err)
			case c.err != "" && !strings.Contains(err.Error(), `mcp server "`+c.cfg.Name+`"`):
				t.Fatalf("Check: %v does not name the server", err)
			}
		})
	}
}

// onEachRevision runs test on the test server as a server of the
// sessionless revision (calls through the gateway's own client) and as
// one of the revisions before it (a session, calls through the SDK's
// client).
func onEachRevision(t *testing.T, test func(*testing.T, *upstreamtest.Server)) {
	for name, sessions := range map[string]bool{"sessionless": false, "sessions": true} {
		t.Run(name, func(t *testing.T) {
			up := upstreamtest.New()
			up.Sessions = sessions
			test(t, up)
		})
	}
}

// TestListAndCall: the tools listed, filtered and prefixed; a call's
// answer in the gateway's channels, structured content passed on.
func TestListAndCall(t *testing.T) { onEachRevision(t, testListAndCall) }

func testListAndCall(t *testing.T, up *upstreamtest.Server) {
	s := start(t, upstream.Config{URL: up.Serve(t), Prefix: "crm_", Tools: []string{"echo", "create", "picture"}}, nil)
	if v := s.ProtocolVersion(); (v >= "2026-07-28") == up.Sessions {
		t.Fatalf("protocol version %s with sessions %v", v, up.Sessions)
	}
	if got := names(s); !slices.Equal(got, []string{"crm_create", "crm_echo", "crm_picture"}) {
		t.Fatalf("tools = %v", got)
	}
	tools, known := s.Tools()
	if !known {
		t.Fatal("not known after Start")
	}
	for _, tool := range tools {
		if tool.Name != "crm_echo" {
			continue
		}
		if tool.DisplayName != "Echo" || tool.Description != "Says the text back." || tool.Target.Tool != "echo" || tool.Target.Server != "crm" ||
			!strings.Contains(string(tool.InputSchema), `"maxLength":100`) || !strings.Contains(string(tool.OutputSchema), `"echo"`) ||
			tool.Annotations == nil || !*tool.Annotations.ReadOnlyHint {
			t.Errorf("echo listed as %+v", tool)
		}
	}
	out := call(s, "echo", `{"text":"hi <b>"}`)
	if out.Card != nil || out.Result.IsError || out.Result.Content != "hi <b>" || string(out.Result.Structured) != `{"echo":"hi \u003cb\u003e"}` {
		t.Errorf("echo = %+v, structured %s", out.Result, out.Result.Structured)
	}
	pic := call(s, "picture", `{}`).Result
	if len(pic.Items) != 2 || pic.Items[0].Type != "image" || pic.Items[1].URI != "https://example.com/pic.png" ||
		!strings.Contains(pic.Markdown, "[The picture](<https://example.com/pic.png>)") || pic.Content != "a picture" {
		t.Errorf("picture = %+v", pic)
	}
	// The server's own error.
	if out := call(s, "nope", `{}`); !out.Result.IsError || !strings.Contains(out.Result.Content, "mcp server crm") {
		t.Errorf("unknown tool = %+v", out.Result)
	}
}

// TestIdentity: each call carries its user's token, addressed to the
// server; the gateway's own requests carry one with no user.
func TestIdentity(t *testing.T) { onEachRevision(t, testIdentity) }

func testIdentity(t *testing.T, up *upstreamtest.Server) {
	s := start(t, upstream.Config{URL: up.Serve(t), Identity: true, Headers: map[string]string{"X-Api-Key": "k1"}}, nil)
	tp := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	out := s.Call(context.Background(), dispatch.MCPCall{Tool: "whoami", Arguments: jsontext.Value(`{}`), User: "ada", Install: "i9", IdempotencyKey: "k", Traceparent: tp})
	if out.Result.Content != "Bearer ada@i9->crm" {
		t.Errorf("whoami = %+v", out.Result)
	}
	if h := up.Headers(); len(h) != 1 || h[0].Get("X-Api-Key") != "k1" {
		t.Errorf("headers = %v", h)
	}
	if m := up.Metas(); len(m) != 1 || m[0][upstream.MetaIdempotencyKey] != "k" || m[0][upstream.MetaTraceparent] != tp {
		t.Errorf("_meta = %v", m)
	}
	if out := s.Call(context.Background(), dispatch.MCPCall{Tool: "whoami", Arguments: jsontext.Value(`{}`)}); !out.Result.IsError || !strings.Contains(out.Result.Content, "names no user") {
		t.Errorf("a call with no user = %+v", out.Result)
	}
	if runs := up.Runs("whoami"); runs != 1 {
		t.Errorf("whoami ran %d times; the call with no user must not be sent", runs)
	}
}

// TestConnection: each call carries the user's token of the server's
// connection; a call without one is not sent.
func TestConnection(t *testing.T) { onEachRevision(t, testConnection) }

func testConnection(t *testing.T, up *upstreamtest.Server) {
	s := start(t, upstream.Config{URL: up.Serve(t), Connection: "gmail"}, nil)
	if s.Connection() != "gmail" || s.SendsIdentity() {
		t.Fatalf("Connection = %q, SendsIdentity = %v", s.Connection(), s.SendsIdentity())
	}
	out := s.Call(context.Background(), dispatch.MCPCall{Tool: "whoami", Arguments: jsontext.Value(`{}`), User: "ada", Install: "i9", Token: "at_ada"})
	if out.Result.Content != "Bearer at_ada" {
		t.Errorf("whoami = %+v", out.Result)
	}
	if out := s.Call(context.Background(), dispatch.MCPCall{Tool: "whoami", Arguments: jsontext.Value(`{}`), User: "bob"}); !out.Result.IsError || !strings.Contains(out.Result.Content, "has none") {
		t.Errorf("a call without a token = %+v", out.Result)
	}
	if runs := up.Runs("whoami"); runs != 1 {
		t.Errorf("whoami ran %d times; the call without a token must not be sent", runs)
	}
}

// TestInputRequired: the server's input request is a card whose buttons
// continue the call with the answer; the server sees its own state back.
func TestInputRequired(t *testing.T) {
	up := upstreamtest.New()
	s := start(t, upstream.Config{URL: up.Serve(t)}, nil)
	out := call(s, "approve", `{"item":"invoice 7"}`)
	if out.Card == nil {
		t.Fatalf("approve answered %+v, not a card", out.Result)
	}
	card, err := result.ParseCard(out.Card)
	if err != nil {
		t.Fatal(err)
	}
	if card.Title != "Approve invoice 7?" || len(card.Elements) != 3 || card.Elements[0].Label != "Yes" || card.Elements[1].Label != "No" || card.Elements[2].ID != "decline" {
		t.Fatalf("card = %+v", card)
	}
	for _, c := range []struct{ button, want string }{{"choice-0", "approved invoice 7"}, {"choice-1", "not approved invoice 7"}, {"decline", "declined invoice 7"}} {
		b, _ := card.Button(c.button)
		owner, err := dispatch.Compile(dispatch.Spec{Type: "mcp", Server: "crm", Tool: "approve"}, dispatch.Env{Servers: map[string]dispatch.MCPServer{"crm": s}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dispatch.CompileCardButton(b.Target, owner); err != nil {
			t.Fatalf("button %s: %v", c.button, err)
		}
		got := s.Call(context.Background(), dispatch.MCPCall{Tool: "approve", Continue: b.Input, User: "u1"})
		if got.Card != nil || got.Result.Content != c.want {
			t.Errorf("button %s: %+v", c.button, got.Result)
		}
	}
}

// TestListChanged: a tool the server adds is listed without a reload,
// and Changed is told.
func TestListChanged(t *testing.T) {
	up := upstreamtest.New()
	var changes atomic.Int32
	s := start(t, upstream.Config{URL: up.Serve(t)}, func(*upstream.Server) { changes.Add(1) })
	time.Sleep(200 * time.Millisecond) // the GET stream that hears notifications opens after connecting
	up.AddTool("later")
	eventually(t, "the new tool listed", func() bool { return slices.Contains(names(s), "later") && changes.Load() > 0 })
	if out := call(s, "later", `{}`); out.Result.Content != "later ran" {
		t.Errorf("later = %+v", out.Result)
	}
}

// TestRestart: while the server is down its calls are error results that
// name it; it is connected again when it is back.
func TestRestart(t *testing.T) {
	up := upstreamtest.New()
	s := start(t, upstream.Config{URL: up.Serve(t), Timeout: 2 * time.Second}, nil)
	if out := call(s, "echo", `{"text":"1"}`); out.Result.IsError {
		t.Fatal(out.Result)
	}
	up.Stop()
	out := call(s, "echo", `{"text":"2"}`)
	if !out.Result.IsError || !strings.Contains(out.Result.Content, "mcp server crm") || strings.Contains(out.Result.Content, "127.0.0.1") {
		t.Errorf("a call while down = %+v", out.Result)
	}
	up.Restart(t)
	eventually(t, "a call after the restart", func() bool { return call(s, "echo", `{"text":"3"}`).Result.Content == "3" })
}

// TestDownAtStart: a server down at start is not fatal; its tools come
// when it is up.
func TestDownAtStart(t *testing.T) {
	up := upstreamtest.New()
	url := up.Serve(t)
	up.Stop()
	var changes atomic.Int32
	s, err := upstream.New(upstream.Config{Name: "crm", URL: url, Timeout: time.Second, Tools: []string{"echo"}}, upstream.Options{Changed: func(*upstream.Server) { changes.Add(1) }, Authorization: authorization})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Start(); err == nil {
		t.Fatal("Start succeeded with the server down")
	}
	if _, known := s.Tools(); known {
		t.Error("tools known with the server down")
	}
	if p := s.Placeholder("echo"); p.Name != "echo" || p.Target.Server != "crm" {
		t.Errorf("placeholder = %+v", p)
	}
	if out := call(s, "echo", `{"text":"x"}`); !out.Result.IsError || !strings.Contains(out.Result.Content, "mcp server crm is unavailable") {
		t.Errorf("a call while down = %+v", out.Result)
	}
	up.Restart(t)
	eventually(t, "listed once up", func() bool { _, known := s.Tools(); return known })
	// The first list after a failed start is a change: the gateway
	// replaces the placeholders.
	eventually(t, "Changed told", func() bool { return changes.Load() > 0 })
}

func TestLimits(t *testing.T) {
	up := upstreamtest.New()
	url := up.Serve(t)
	s := start(t, upstream.Config{URL: url, Timeout: 500 * time.Millisecond, MaxResultSize: 2000}, nil)
	if out := call(s, "slow", `{}`); !out.Result.IsError || !strings.Contains(out.Result.Content, "did not answer within 500ms") {
		t.Errorf("slow = %+v", out.Result)
	}
	if out := call(s, "big", `{"n":5000}`); !out.Result.IsError || !strings.Contains(out.Result.Content, "max_result_size") {
		t.Errorf("big = %+v", out.Result)
	}
	if out := call(s, "big", `{"n":500}`); out.Result.IsError {
		t.Errorf("a small answer = %+v", out.Result)
	}
	// A redirect is not followed.
	r, err := upstream.New(upstream.Config{Name: "moved", URL: strings.TrimSuffix(url, "/mcp") + "/moved", Timeout: time.Second}, upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Start(); err == nil {
		t.Error("connected through a redirect")
	}
}

// TestStdio: a command is started, its stderr logged, and started again
// when it exits.
func TestStdio(t *testing.T) {
	s, logs := startStdio(t, "exit-after-1")
	if out := call(s, "create", `{"name":"a"}`); out.Result.Content != "created a (run 1)" {
		t.Fatalf("create = %+v", out.Result)
	}
	// The child exits after its first call; the next is served by a new one.
	eventually(t, "a call after the command restarted", func() bool {
		return call(s, "create", `{"name":"b"}`).Result.Content == "created b (run 1)"
	})
	if n := logs.FilterMessage("stderr").FilterField(zap.ByteString("line", []byte("upstreamtest: serving on stdio"))).Len(); n < 2 {
		t.Errorf("%d stderr lines logged, want one per start (2)", n)
	}
}

// TestCloseUnstarted: a server never started closes at once.
func TestCloseUnstarted(t *testing.T) {
	s, err := upstream.New(upstream.Config{Name: "crm", URL: "http://127.0.0.1:1/mcp"}, upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = s.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close of a server never started hangs")
	}
}

// TestCrashLoopBacksOff: a command that exits right after it answers is
// started again after longer and longer waits, not at once.
func TestCrashLoopBacksOff(t *testing.T) {
	_, logs := startStdio(t, "exit-after-list")
	time.Sleep(2 * time.Second)
	// Waits of 0.25, 0.5 and 1 s fit at most 4 or 5 starts in 2 s (each
	// start takes some time of its own); without them, dozens.
	n := logs.FilterMessage("mcp server connected").Len()
	t.Logf("%d starts in 2 s", n)
	if n > 5 {
		t.Errorf("%d starts in 2 s", n)
	}
}

// startStdio starts this test binary as a stdio MCP server in the given
// mode (upstreamtest.ServeStdioIfAsked), logging to the logs returned.
func startStdio(t *testing.T, mode string) (*upstream.Server, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	s, err := upstream.New(upstream.Config{
		Name: "local", Command: []string{os.Args[0]}, Env: map[string]string{upstreamtest.StdioEnv: mode}, Timeout: 10 * time.Second,
	}, upstream.Options{Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return s, logs
}

// TestTooManyTools: a server that lists without end is not listed: at
// most 1000 tools are taken from one server.
func TestTooManyTools(t *testing.T) {
	up := upstreamtest.New()
	for i := range 1000 {
		up.AddTool(fmt.Sprintf("extra%d", i))
	}
	s, err := upstream.New(upstream.Config{Name: "crm", URL: up.Serve(t), Timeout: 10 * time.Second}, upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Start(); err == nil || !strings.Contains(err.Error(), "more than 1000 tools") {
		t.Errorf("Start: %v", err)
	}
	if _, known := s.Tools(); known {
		t.Error("the tools were taken")
	}
}
