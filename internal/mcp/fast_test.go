package mcp

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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
