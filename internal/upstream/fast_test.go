package upstream

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestFastCall holds fastCall to the answers a server may give: JSON, an
// event stream with other messages first, errors, and what is not an
// answer at all.
func TestFastCall(t *testing.T) {
	var answer func(w http.ResponseWriter, id string)
	var got struct {
		header http.Header
		body   map[string]any
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		got.header = r.Header.Clone()
		got.body = nil
		_ = json.Unmarshal(raw, &got.body)
		answer(w, fmt.Sprint(got.body["id"]))
	}))
	defer srv.Close()
	s, err := New(Config{Name: "crm", URL: srv.URL, Headers: map[string]string{"X-Key": "k"}}, Options{Version: "9"})
	if err != nil {
		t.Fatal(err)
	}
	call := func() (*sdk.CallToolResult, error) {
		return s.fastCall(context.Background(), "2026-07-28", &sdk.CallToolParams{
			Name: "echo", Arguments: jsontext.Value(`{"a":1}`), Meta: sdk.Meta{MetaIdempotencyKey: "key"}})
	}
	result := func(id, text string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"` + text + `"}],"resultType":"complete"}}`
	}

	answer = func(w http.ResponseWriter, id string) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, result(id, "json"))
	}
	res, err := call()
	if err != nil || res.Content[0].(*sdk.TextContent).Text != "json" {
		t.Fatalf("JSON answer: %v %+v", err, res)
	}
	for k, v := range map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "echo", "Mcp-Protocol-Version": "2026-07-28", "X-Key": "k", "Content-Type": "application/json"} {
		if got.header.Get(k) != v {
			t.Errorf("header %s = %q, want %q", k, got.header.Get(k), v)
		}
	}
	params, _ := got.body["params"].(map[string]any)
	meta, _ := params["_meta"].(map[string]any)
	if got.body["method"] != "tools/call" || params["name"] != "echo" || fmt.Sprint(params["arguments"]) != "map[a:1]" ||
		meta[metaProtocolVersion] != "2026-07-28" || meta[MetaIdempotencyKey] != "key" || fmt.Sprint(meta[metaClientInfo]) != "map[name:toolgate version:9]" {
		t.Errorf("request = %v", got.body)
	}

	answer = func(w http.ResponseWriter, id string) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n")
		io.WriteString(w, "event: message\ndata: "+result("99999", "not ours")+"\n\n")
		io.WriteString(w, ": a comment\nevent: message\ndata: "+result(id, strings.Repeat("y", 10000))+"\n\n")
	}
	if res, err := call(); err != nil || res.Content[0].(*sdk.TextContent).Text != strings.Repeat("y", 10000) {
		t.Fatalf("event stream: %v", err)
	}

	for name, c := range map[string]struct {
		answer func(w http.ResponseWriter, id string)
		want   string
		rpc    bool
	}{
		"JSON-RPC error": {func(w http.ResponseWriter, id string) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"error":{"code":-32602,"message":"unknown tool"}}`)
		}, "unknown tool", true},
		"HTTP 500": {func(w http.ResponseWriter, id string) { http.Error(w, "boom", 500) }, "HTTP 500", false},
		"text": {func(w http.ResponseWriter, id string) {
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "hello")
		}, `Content-Type "text/plain"`, false},
		"stream without answer": {func(w http.ResponseWriter, id string) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: "+result("99999", "x")+"\n\n")
		}, "ended without an answer", false},
		"another id": {func(w http.ResponseWriter, id string) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, result("99999", "x"))
		}, "another request", false},
		"not JSON": {func(w http.ResponseWriter, id string) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, "{")
		}, "not JSON-RPC", false},
	} {
		answer = c.answer
		_, err := call()
		_, isRPC := err.(*jsonrpc.Error)
		if err == nil || !strings.Contains(err.Error(), c.want) || isRPC != c.rpc {
			t.Errorf("%s: %v (JSON-RPC error %v)", name, err, isRPC)
		}
	}
}
