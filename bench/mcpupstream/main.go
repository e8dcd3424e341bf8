// Command mcpupstream is the load harness's MCP upstream: an MCP server
// built with the official Go SDK, over Streamable HTTP at /mcp on a
// loopback port, with one tool, echo {text}, whose answer is the text
// padded with "x" to -size bytes (1 KiB, as bench/upstream's answers).
//
// Clients of the sessionless revision (2026-07-28) are answered
// statelessly, as toolgate's own /mcp answers them; older clients in
// sessions, as internal/upstream/upstreamtest's server does.
package main

import (
	"context"
	"flag"
	"log"
	"net/http"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9803", "address to listen on")
	size := flag.Int("size", 1024, "size of echo's text in bytes: the text given, padded with x")
	flag.Parse()
	log.Printf("mcp upstream on http://%s/mcp answering %d bytes of text", *addr, *size)
	log.Fatal(http.ListenAndServe(*addr, handler(newServer(*size))))
}

// newServer builds the server and its echo tool.
func newServer(size int) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "mcpupstream", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{
		Name:        "echo",
		Description: "Says the text back, padded with x.",
		InputSchema: jsontext.Value(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true},
	}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var in struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return nil, err
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: pad(in.Text, size)}}}, nil
	})
	return s
}

// pad puts x after text up to size bytes; a longer text is left as it is.
func pad(text string, size int) string {
	if len(text) >= size {
		return text
	}
	return text + strings.Repeat("x", size-len(text))
}

// handler serves s at /mcp: the sessionless revision and later
// statelessly, the revisions before it in sessions.
func handler(s *sdk.Server) http.Handler {
	get := func(*http.Request) *sdk.Server { return s }
	sessions := sdk.NewStreamableHTTPHandler(get, nil)
	stateless := sdk.NewStreamableHTTPHandler(get, &sdk.StreamableHTTPOptions{Stateless: true})
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Protocol-Version") >= "2026-07-28" {
			stateless.ServeHTTP(w, r)
			return
		}
		sessions.ServeHTTP(w, r)
	})
	return mux
}
