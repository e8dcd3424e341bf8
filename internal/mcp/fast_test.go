package mcp

import (
	"bytes"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/jsonread"
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
			Name      string         `json:"name"`
			Arguments jsontext.Value `json:"arguments"`
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
	s.implMeta, _ = json.Marshal(sdk.Meta{sdk.MetaKeyServerInfo: s.impl}, jsonread.Legacy)
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

// FuzzDecodeCallMaps: decodeCall, which reads the body once, takes what
// decodeCallMaps (the fast path's first decoder: a strictness walk, then
// encoding/json into maps) takes, and reads it the same (but for the
// members of _meta the sessionless revision defines, which it keeps only
// as they came); it may refuse more, names with escapes.
func FuzzDecodeCallMaps(f *testing.F) {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"n","version":"1"},"toolgate/identity":{"user":"u","install":"i"},"toolgate/callId":"c\u00e9","n":1.5e3,"z":null}`
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":[1,{"b":2}]},` + meta + `}}`))
	f.Add([]byte(`{"params":{` + meta + `,"name":"t"},"id":"x","method":"tools/call","jsonrpc":"2.0"}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/clientInfo":null}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"n\u0061me":"t","_meta":{}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":` + strings.Repeat("[", 62) + strings.Repeat("]", 62) + `,"_meta":{}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"a":` + strings.Repeat("[", 61) + strings.Repeat("]", 61) + `}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := decodeCall(body)
		want, wantOK := decodeCallMaps(body)
		switch {
		case ok && !wantOK:
			t.Fatalf("decodeCall took what decodeCallMaps refuses")
		case !ok && wantOK && !bytes.Contains(body, []byte(`\`)):
			t.Fatalf("decodeCall refused what decodeCallMaps takes")
		case !ok:
			return
		}
		info, hasInfo := want.rawMeta[sdk.MetaKeyClientInfo]
		for _, k := range []string{sdk.MetaKeyProtocolVersion, sdk.MetaKeyClientCapabilities, sdk.MetaKeyClientInfo} {
			delete(want.meta, k) // kept raw only
		}
		if got.id != want.id || got.name != want.name || !bytes.Equal(got.args, want.args) || !reflect.DeepEqual(got.meta, want.meta) ||
			!bytes.Equal(got.version, want.rawMeta[sdk.MetaKeyProtocolVersion]) || !bytes.Equal(got.clientCaps, want.rawMeta[sdk.MetaKeyClientCapabilities]) ||
			!bytes.Equal(got.clientInfo, info) || got.hasInfo != hasInfo {
			t.Fatalf("decodeCall read %+v, decodeCallMaps %+v", got, want)
		}
	})
}

// mapsCall is what decodeCallMaps reads.
type mapsCall struct {
	id      jsonrpc.ID
	name    string
	args    jsontext.Value
	meta    sdk.Meta
	rawMeta map[string]jsontext.Value
}

// decodeCallMaps is the fast path's first decoder, kept to check the one
// that replaced it.
func decodeCallMaps(body []byte) (mapsCall, bool) {
	var fc mapsCall
	if hasSurrogateEscape(body) || !strictJSON(body) {
		return fc, false
	}
	var top map[string]jsontext.Value
	if json.Unmarshal(body, &top) != nil || len(top) != 4 ||
		string(top["jsonrpc"]) != `"2.0"` || string(top["method"]) != `"tools/call"` {
		return fc, false
	}
	id, ok := decodeID(top["id"])
	if !ok {
		return fc, false
	}
	var params map[string]jsontext.Value
	if !isObject(top["params"]) || json.Unmarshal(top["params"], &params) != nil {
		return fc, false
	}
	fc.id = id
	for k, v := range params {
		switch k {
		case "name":
			if !plainString(v) || json.Unmarshal(v, &fc.name) != nil {
				return fc, false
			}
		case "arguments":
			if !isObject(v) {
				return fc, false
			}
			fc.args = v
		case "_meta":
			if !isObject(v) || json.Unmarshal(v, &fc.rawMeta) != nil || json.Unmarshal(v, &fc.meta) != nil {
				return fc, false
			}
		default:
			return fc, false
		}
	}
	return fc, fc.name != "" && fc.meta != nil
}

func strictJSON(body []byte) bool {
	return jsonread.One(body, func(dec *jsontext.Decoder) error {
		if dec.PeekKind() != '{' {
			return errNotStrict
		}
		for {
			if _, err := dec.ReadToken(); err != nil {
				return err
			}
			switch depth := dec.StackDepth(); {
			case depth > maxFastDepth:
				return errNotStrict
			case depth == 0:
				return nil
			}
		}
	}) == nil
}
