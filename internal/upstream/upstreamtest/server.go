// Package upstreamtest runs MCP servers built with the official Go SDK for
// tests of the gateway's upstream MCP servers: over Streamable HTTP on a
// loopback port that survives a restart, or over stdio in a child
// process (the test binary itself, see ServeStdioIfAsked).
package upstreamtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Server is an MCP server of test tools:
//
//   - echo {text}: the text, and {"echo": text} as structured content
//   - create {name}: counts its runs, "created NAME (run N)"
//   - whoami {}: the request's Authorization header
//   - approve {item}: asks for input (an input_required round trip, a
//     boolean "approved"), then answers "approved ITEM" or "declined ITEM"
//   - slow {}: waits until the call is cancelled
//   - big {n}: n bytes of text
//   - picture {}: a text, an image and a resource link
//   - board {}: an MCP Apps tool, whose view is the resource BoardView
//
// It also has a resource no tool names, SecretResource.
type Server struct {
	MCP *sdk.Server
	// Sessions serves every client in a session, as servers of the
	// revisions before 2026-07-28 do: an input request is then an
	// elicitation/create request during the call.
	Sessions bool

	runs   sync.Map // tool name -> *atomic.Int64
	mu     sync.Mutex
	auth   []string // Authorization of each tools/call, in order
	hdrs   []http.Header
	metas  []sdk.Meta
	ln     net.Listener
	srv    *http.Server
	addr   string
	closed bool
}

// New builds the server's tools, serving nothing yet.
func New() *Server {
	s := &Server{MCP: sdk.NewServer(&sdk.Implementation{Name: "upstreamtest", Version: "1"}, nil)}
	obj := func(props string, required ...string) jsontext.Value {
		req, _ := json.Marshal(required)
		if required == nil {
			req = []byte("[]")
		}
		return jsontext.Value(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `,"additionalProperties":false}`)
	}
	s.add(&sdk.Tool{Name: "echo", Title: "Echo", Description: "Says the text back.",
		InputSchema:  obj(`"text":{"type":"string","maxLength":100}`, "text"),
		OutputSchema: jsontext.Value(`{"type":"object","properties":{"echo":{"type":"string"}}}`),
		Annotations:  &sdk.ToolAnnotations{ReadOnlyHint: true},
	}, func(_ context.Context, args map[string]any, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		text, _ := args["text"].(string)
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}, StructuredContent: map[string]any{"echo": text}}, nil
	})
	s.add(&sdk.Tool{Name: "create", Description: "Creates a thing; counts its runs.", InputSchema: obj(`"name":{"type":"string","minLength":1}`, "name")},
		func(_ context.Context, args map[string]any, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return text(fmt.Sprintf("created %v (run %d)", args["name"], s.Runs("create"))), nil
		})
	s.add(&sdk.Tool{Name: "whoami", Description: "Says the Authorization header it got.", InputSchema: obj(``)},
		func(_ context.Context, _ map[string]any, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			auth := ""
			if req.Extra != nil && req.Extra.Header != nil {
				auth = req.Extra.Header.Get("Authorization")
			}
			return text(auth), nil
		})
	s.add(&sdk.Tool{Name: "approve", Description: "Asks a person to approve an item.", InputSchema: obj(`"item":{"type":"string"}`, "item")},
		func(_ context.Context, args map[string]any, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			item, _ := args["item"].(string)
			resp, answered := req.Params.InputResponses["ok"].(*sdk.ElicitResult)
			if !answered {
				return &sdk.CallToolResult{
					InputRequests: sdk.InputRequestMap{"ok": &sdk.ElicitParams{Mode: "form", Message: "Approve " + item + "?",
						RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"approved": map[string]any{"type": "boolean"}}, "required": []any{"approved"}}}},
					RequestState: "asked:" + item,
				}, nil
			}
			if req.Params.RequestState != "asked:"+item {
				return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "bad request state " + req.Params.RequestState}}}, nil
			}
			if resp.Action == "accept" && resp.Content["approved"] == true {
				return text("approved " + item), nil
			}
			if resp.Action == "accept" {
				return text("not approved " + item), nil
			}
			return text(resp.Action + "d " + item), nil
		})
	s.add(&sdk.Tool{Name: "slow", Description: "Waits until cancelled.", InputSchema: obj(``)},
		func(ctx context.Context, _ map[string]any, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			<-ctx.Done()
			return text("too late"), nil
		})
	s.add(&sdk.Tool{Name: "big", Description: "Answers n bytes.", InputSchema: obj(`"n":{"type":"integer"}`, "n")},
		func(_ context.Context, args map[string]any, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			n, _ := args["n"].(float64)
			return text(strings.Repeat("x", int(n))), nil
		})
	s.add(&sdk.Tool{Name: "picture", Description: "A picture and a link.", InputSchema: obj(``)},
		func(context.Context, map[string]any, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{
				&sdk.TextContent{Text: "a picture"},
				&sdk.ImageContent{Data: []byte{0x89, 'P', 'N', 'G'}, MIMEType: "image/png"},
				&sdk.ResourceLink{URI: "https://example.com/pic.png", Name: "pic", Title: "The picture"},
			}}, nil
		})
	s.add(&sdk.Tool{Name: "board", Description: "A board, shown in a view.", InputSchema: obj(``),
		Meta: sdk.Meta{"ui": map[string]any{"resourceUri": BoardView, "visibility": []any{"model", "app"}}}},
		func(context.Context, map[string]any, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "3 cards"}}, StructuredContent: map[string]any{"cards": 3}}, nil
		})
	for uri, html := range map[string]string{BoardView: BoardHTML, SecretResource: "secret"} {
		s.MCP.AddResource(&sdk.Resource{URI: uri, Name: uri, MIMEType: "text/html;profile=mcp-app"},
			func(context.Context, *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
				return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "text/html;profile=mcp-app", Text: html}}}, nil
			})
	}
	return s
}

// The board tool's view, and a resource no tool names.
const (
	BoardView      = "ui://upstreamtest/board.html"
	BoardHTML      = "<!doctype html><title>board</title>"
	SecretResource = "ui://upstreamtest/secret.html"
)

func text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

type handler func(ctx context.Context, args map[string]any, req *sdk.CallToolRequest) (*sdk.CallToolResult, error)

// add adds a tool whose runs are counted and whose Authorization is kept.
func (s *Server) add(t *sdk.Tool, h handler) {
	s.MCP.AddTool(t, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		s.count(t.Name)
		s.mu.Lock()
		s.metas = append(s.metas, req.Params.Meta)
		if req.Extra != nil && req.Extra.Header != nil {
			s.auth = append(s.auth, req.Extra.Header.Get("Authorization"))
			s.hdrs = append(s.hdrs, req.Extra.Header.Clone())
		}
		s.mu.Unlock()
		var args map[string]any
		if len(req.Params.Arguments) > 0 {
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, err
			}
		}
		return h(ctx, args, req)
	})
}

// AddTool adds a tool while clients are connected: they are told their
// list changed.
func (s *Server) AddTool(name string) {
	s.add(&sdk.Tool{Name: name, Description: "Added later.", InputSchema: jsontext.Value(`{"type":"object"}`)},
		func(context.Context, map[string]any, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return text(name + " ran"), nil
		})
}

func (s *Server) count(tool string) {
	v, _ := s.runs.LoadOrStore(tool, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

// Runs is how many times the tool was called.
func (s *Server) Runs(tool string) int {
	v, ok := s.runs.Load(tool)
	if !ok {
		return 0
	}
	return int(v.(*atomic.Int64).Load())
}

// Authorizations are the Authorization headers of the tools/calls so far.
func (s *Server) Authorizations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auth...)
}

// Metas are the _meta of the tools/calls so far.
func (s *Server) Metas() []sdk.Meta {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sdk.Meta(nil), s.metas...)
}

// Headers are the request headers of the tools/calls so far.
func (s *Server) Headers() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.hdrs...)
}

// Serve serves the server over Streamable HTTP on a loopback port, until
// the test ends; URL is its endpoint.
func (s *Server) Serve(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	s.start(ln)
	t.Cleanup(func() { s.Stop() })
	return s.URL()
}

// URL is the server's endpoint.
func (s *Server) URL() string { return "http://" + s.addr + "/mcp" }

func (s *Server) start(ln net.Listener) {
	get := func(*http.Request) *sdk.Server { return s.MCP }
	sessions := sdk.NewStreamableHTTPHandler(get, nil)
	stateless := sdk.NewStreamableHTTPHandler(get, &sdk.StreamableHTTPOptions{Stateless: true})
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		// The sessionless revision statelessly, as toolgate's own /mcp;
		// older clients in sessions.
		if r.Header.Get("Mcp-Protocol-Version") >= "2026-07-28" && !s.Sessions {
			stateless.ServeHTTP(w, r)
			return
		}
		sessions.ServeHTTP(w, r)
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/mcp", http.StatusTemporaryRedirect)
	})
	s.mu.Lock()
	s.ln, s.srv, s.closed = ln, &http.Server{Handler: mux}, false
	srv := s.srv
	s.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// Stop stops serving: the port refuses connections, and open streams end.
func (s *Server) Stop() {
	s.mu.Lock()
	srv, closed := s.srv, s.closed
	s.closed = true
	s.mu.Unlock()
	if srv != nil && !closed {
		_ = srv.Close()
	}
}

// Restart serves again on the same port.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	var ln net.Listener
	var err error
	for range 50 {
		if ln, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	s.start(ln)
}

// StdioEnv is the variable that makes a test binary an MCP server over
// stdio (ServeStdioIfAsked).
const StdioEnv = "UPSTREAMTEST_STDIO"

// ServeStdioIfAsked serves New's tools over stdin and stdout and exits,
// when the process was started as a stdio server (StdioEnv set); call it
// first thing in TestMain. With StdioEnv set to "exit-after-1", the
// process exits after its first tools/call has been answered; with
// "exit-after-list", after its first tools/list.
func ServeStdioIfAsked() {
	mode, ok := os.LookupEnv(StdioEnv)
	if !ok {
		return
	}
	s := New()
	if exitAfter := map[string]string{"exit-after-1": "tools/call", "exit-after-list": "tools/list"}[mode]; exitAfter != "" {
		s.MCP.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
			return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
				res, err := next(ctx, method, req)
				if method == exitAfter {
					go func() {
						time.Sleep(100 * time.Millisecond)
						os.Exit(0)
					}()
				}
				return res, err
			}
		})
	}
	fmt.Fprintln(os.Stderr, "upstreamtest: serving on stdio")
	err := s.MCP.Run(context.Background(), &sdk.StdioTransport{})
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "upstreamtest:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// SessionlessRequest is a tools/call of tool with the given arguments
// (JSON) as a client of the sessionless revision (2026-07-28) sends it on
// its own, no session set up first: the protocol's headers, and the
// version and the client in _meta. The load harness sends the same.
func SessionlessRequest(url, tool, arguments string) *http.Request {
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":` + strconv.Quote(tool) + `,"arguments":` + arguments +
		`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"test","version":"1"}}}}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("Mcp-Protocol-Version", "2026-07-28")
	h.Set("Mcp-Method", "tools/call")
	h.Set("Mcp-Name", tool)
	return req
}
