package mcp

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/result"
)

// FuzzDecodeCall: what decodeCall takes is a JSON-RPC tools/call the SDK
// decodes to the same method, id, name and arguments.
func FuzzDecodeCall(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":1},"_meta":{"k":"v"}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"t","_meta":{}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"t","_meta":{}}}`))
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{}}}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		fc, ok := decodeCall(body)
		if !ok {
			return
		}
		msg, err := jsonrpc.DecodeMessage(body)
		if err != nil {
			t.Fatalf("decodeCall took what the SDK refuses: %v", err)
		}
		req, isReq := msg.(*jsonrpc.Request)
		if !isReq || req.Method != "tools/call" || req.ID != fc.id {
			t.Fatalf("the SDK reads %#v, decodeCall id %v", msg, fc.id)
		}
		var p struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal(req.Params, &p); err != nil || p.Name != fc.name || string(p.Arguments) != string(fc.args) {
			t.Fatalf("params %s: the SDK's name %q arguments %s, decodeCall's %q %s", req.Params, p.Name, p.Arguments, fc.name, fc.args)
		}
	})
}

// FuzzAppendEvent: the event appendEvent writes for a tool's result is the
// one marshalNoEscape and successMessage give, byte for byte, whatever the
// text.
func FuzzAppendEvent(f *testing.F) {
	f.Add("plain", "", "", false, int64(1))
	f.Add("a<b>&\"\\\n\t\x00\x7f é \u2028\u2029 \xff", "**md** <i>", "https://x/e?a=1&b=2", true, int64(-42))
	f.Add("", "", "", false, int64(0))
	s := &Server{impl: &sdk.Implementation{Name: "toolgate", Version: "v<1>&"}}
	s.implMeta, _ = json.Marshal(sdk.Meta{sdk.MetaKeyServerInfo: s.impl})
	f.Fuzz(func(t *testing.T, text, markdown, embed string, isError bool, n int64) {
		for _, id := range []any{float64(n % 1e15), "id-" + strconv.FormatInt(n, 36)} {
			jid, err := jsonrpc.MakeID(id)
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.finish(toolResult(result.Result{Content: text, Markdown: markdown, EmbedURL: embed, IsError: isError}, true), nil)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := marshalNoEscape(res)
			if err != nil {
				t.Fatal(err)
			}
			want := "event: message\ndata: " + string(successMessage(jid, raw)) + "\n\n"
			got, ok := s.appendEvent(nil, jid, res)
			switch {
			case ok && string(got) != want:
				t.Fatalf("appendEvent:\n%s\nmarshalled:\n%s", got, want)
			case !ok && embed == "":
				t.Fatalf("appendEvent did not write text content:\n%s", want)
			case ok && embed != "":
				t.Fatalf("appendEvent wrote a resource link")
			}
		}
	})
}
