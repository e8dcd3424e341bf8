package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// The SDK's client gets echo's padded text on either revision: the
// sessionless one (answered statelessly) and 2025-11-25 (in a session).
func TestEcho(t *testing.T) {
	srv := httptest.NewServer(handler(newServer(64)))
	defer srv.Close()
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			ctx := context.Background()
			c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
			cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, &sdk.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != version {
				t.Fatalf("protocol version %q, want %q", got, version)
			}
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello"}})
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError || len(res.Content) != 1 {
				t.Fatalf("result %+v", res)
			}
			want := "hello" + strings.Repeat("x", 64-len("hello"))
			if got := res.Content[0].(*sdk.TextContent).Text; got != want {
				t.Errorf("text %q, want %q", got, want)
			}
		})
	}
}

// The harness's request, a sessionless tools/call with no initialize
// before it, is answered without a session.
func TestSessionlessPost(t *testing.T) {
	srv := httptest.NewServer(handler(newServer(1024)))
	defer srv.Close()
	resp, err := http.DefaultClient.Do(upstreamtest.SessionlessRequest(srv.URL+"/mcp", "echo", `{"text":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, got)
	}
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		t.Errorf("a session was opened: %s", id)
	}
	if !strings.Contains(string(got), `"text":"`+strings.Repeat("x", 1024)+`"`) || strings.Contains(string(got), `"isError":true`) {
		t.Errorf("answer %s", got)
	}
}

func TestPad(t *testing.T) {
	for _, tt := range []struct {
		text string
		size int
		want string
	}{
		{"", 3, "xxx"},
		{"ab", 4, "abxx"},
		{"abcd", 4, "abcd"},
		{"abcdef", 4, "abcdef"},
	} {
		if got := pad(tt.text, tt.size); got != tt.want {
			t.Errorf("pad(%q, %d) = %q, want %q", tt.text, tt.size, got, tt.want)
		}
	}
}
