package httpapi

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/apitest"
)

// fastCase is one MCP request sent through the fast path and through the
// SDK: its body, and headers over the sessionless defaults. fast tells
// whether the fast path must take it (the others go to the SDK).
type fastCase struct {
	name   string
	body   string
	header []string
	fast   bool
}

const (
	fastMeta    = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}`
	fastU1      = `"toolgate/identity":{"user":"u_1","install":"in_1"}`
	fastElicit  = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}`
	fastAppsCap = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":["text/html;profile=mcp-app"]}}}`
)

// callBody is a tools/call of tool with args and the _meta members meta.
func callBody(id, tool, args, meta string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s,"_meta":{%s}}}`, id, tool, args, meta)
}

func fastCases() []fastCase {
	ok := func(name, tool, args, meta string) fastCase {
		return fastCase{name: name, body: callBody("1", tool, args, meta), header: []string{"Mcp-Name", tool}, fast: true}
	}
	sdk := func(name, body string, header ...string) fastCase {
		return fastCase{name: name, body: body, header: append([]string{"Mcp-Name", "get_item"}, header...)}
	}
	item := callBody("1", "get_item", `{"id":"b1"}`, fastMeta+","+fastU1)
	return []fastCase{
		ok("success", "get_item", `{"id":"b1"}`, fastMeta+","+fastU1),
		ok("markdown", "md", `{}`, fastMeta+","+fastU1),
		ok("embed link", "both", `{}`, fastMeta+","+fastU1),
		ok("invalid input", "save", `{"n":"seven"}`, fastMeta+","+fastU1),
		ok("additional property", "save", `{"id":"1","evil":true}`, fastMeta+","+fastU1),
		ok("tool error", "domain_error", `{}`, fastMeta+","+fastU1),
		ok("no identity", "md", `{}`, fastMeta),
		ok("card as input_required", "card", `{"kind":"plain"}`, fastElicit+","+fastU1),
		ok("card without elicitation", "card", `{"kind":"plain"}`, fastMeta+","+fastU1),
		ok("apps view structuredContent", "md", `{}`, fastAppsCap+","+fastU1),
		ok("apps view card", "card", `{"kind":"plain"}`, fastAppsCap+","+fastU1),
		ok("thread", "get_item", `{"id":"b1"}`, fastMeta+","+fastU1+`,"toolgate/threadId":"th_1"`),
		ok("malformed identity", "get_item", `{"id":"b1"}`, fastMeta+`,"toolgate/identity":{"user":5}`),
		ok("identity out of bounds", "get_item", `{"id":"b1"}`, fastMeta+`,"toolgate/identity":{"user":"","install":"in_1"}`),
		ok("call id not a string", "get_item", `{"id":"b1"}`, fastMeta+","+fastU1+`,"toolgate/callId":7`),
		ok("call id malformed", "get_item", `{"id":"b1"}`, fastMeta+","+fastU1+`,"toolgate/callId":"a b"`),
		{name: "string id", body: callBody(`"abc-1"`, "get_item", `{"id":"b1"}`, fastMeta+","+fastU1), header: []string{"Mcp-Name", "get_item"}, fast: true},
		{name: "id 0", body: callBody(`0`, "get_item", `{"id":"b1"}`, fastMeta+","+fastU1), header: []string{"Mcp-Name", "get_item"}, fast: true},
		{name: "negative id", body: callBody(`-42`, "get_item", `{"id":"b1"}`, fastMeta+","+fastU1), header: []string{"Mcp-Name", "get_item"}, fast: true},
		{name: "15-digit id", body: callBody(`999999999999999`, "get_item", `{"id":"b1"}`, fastMeta+","+fastU1), header: []string{"Mcp-Name", "get_item"}, fast: true},
		{name: "empty string id", body: callBody(`""`, "get_item", `{"id":"b1"}`, fastMeta+","+fastU1), header: []string{"Mcp-Name", "get_item"}, fast: true},
		{name: "negative id", body: callBody(`-42`, "get_item", `{"id":"b1"}`, fastMeta+","+fastU1), header: []string{"Mcp-Name", "get_item"}, fast: true},
		{name: "Accept wildcard", body: callBody("1", "get_item", `{"id":"b1"}`, fastMeta+","+fastU1), header: []string{"Mcp-Name", "get_item", "Accept", "*/*"}, fast: true},
		{name: "no arguments", body: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"md","_meta":{` + fastMeta + "," + fastU1 + `}}}`, header: []string{"Mcp-Name", "md"}, fast: true},

		// Refused, or not taken: the SDK answers, through both.
		sdk("unknown tool", callBody("1", "nope", `{}`, fastMeta), "Mcp-Name", "nope"),
		sdk("wrong Mcp-Name", item, "Mcp-Name", "md"),
		sdk("no Mcp-Name", item, "Mcp-Name", ""),
		sdk("wrong Mcp-Method", item, "Mcp-Method", "tools/list"),
		sdk("no Mcp-Method", item, "Mcp-Method", ""),
		sdk("missing capabilities", callBody("1", "get_item", `{"id":"b1"}`, `"io.modelcontextprotocol/protocolVersion":"2026-07-28",`+fastU1)),
		sdk("capabilities not an object", callBody("1", "get_item", `{"id":"b1"}`, `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":"x"`)),
		sdk("client info malformed", callBody("1", "get_item", `{"id":"b1"}`, fastMeta+`,"io.modelcontextprotocol/clientInfo":"x"`)),
		sdk("client info null", callBody("1", "get_item", `{"id":"b1"}`, `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":null`)),
		sdk("no protocolVersion in _meta", callBody("1", "get_item", `{"id":"b1"}`, `"io.modelcontextprotocol/clientCapabilities":{}`)),
		sdk("other protocolVersion in _meta", callBody("1", "get_item", `{"id":"b1"}`, `"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}`)),
		sdk("no _meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_item","arguments":{"id":"b1"}}}`),
		sdk("malformed JSON", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_item"`),
		sdk("trailing garbage", item+`x`),
		sdk("two objects", item+item),
		sdk("empty body", ``),
		sdk("batch", `[`+item+`]`),
		sdk("notification", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"get_item","arguments":{"id":"b1"},"_meta":{`+fastMeta+`}}}`),
		sdk("null id", callBody("null", "get_item", `{"id":"b1"}`, fastMeta+","+fastU1)),
		sdk("fractional id", callBody("1.5", "get_item", `{"id":"b1"}`, fastMeta+","+fastU1)),
		sdk("object id", callBody(`{}`, "get_item", `{"id":"b1"}`, fastMeta+","+fastU1)),
		sdk("huge id", callBody("123456789012345678901", "get_item", `{"id":"b1"}`, fastMeta+","+fastU1)),
		sdk("wrong jsonrpc", strings.Replace(item, `"2.0"`, `"1.0"`, 1)),
		sdk("no jsonrpc", strings.Replace(item, `"jsonrpc":"2.0",`, ``, 1)),
		sdk("other method", strings.Replace(item, `"tools/call"`, `"tools/list"`, 1), "Mcp-Method", "tools/list"),
		sdk("key of another case", strings.Replace(item, `"method"`, `"Method"`, 1)),
		sdk("duplicate key", strings.Replace(item, `"id":1,`, `"id":1,"id":2,`, 1)),
		sdk("duplicate name", strings.Replace(item, `"name":"get_item"`, `"name":"md","name":"get_item"`, 1)),
		sdk("unknown params key", strings.Replace(item, `"name":"get_item"`, `"name":"get_item","task":{}`, 1)),
		sdk("request state", strings.Replace(item, `"name":"get_item"`, `"name":"get_item","requestState":"x"`, 1)),
		sdk("arguments not an object", strings.Replace(item, `{"id":"b1"}`, `[1]`, 1)),
		sdk("arguments null", strings.Replace(item, `{"id":"b1"}`, `null`, 1)),
		sdk("params null", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":null}`),
		sdk("escaped name", strings.Replace(item, `"name":"get_item"`, `"name":"get\u005fitem"`, 1)),
		sdk("lone surrogate", strings.Replace(item, `"b1"`, `"\ud800"`, 1)),
		sdk("invalid UTF-8", strings.Replace(item, `"b1"`, "\"b\xff\"", 1)),
		sdk("Accept without event-stream", item, "Accept", "application/json"),
		sdk("Content-Type text", item, "Content-Type", "text/plain"),
		sdk("Last-Event-ID", item, "Last-Event-ID", "x"),
		sdk("later revision", item, "Mcp-Protocol-Version", "2027-01-01"),
	}
}

// random are the parts of an answer that differ from call to call: the
// signed request state, call ids, times.
var random = regexp.MustCompile(`eyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+|call_[0-9A-Za-z]+|mcp-[0-9A-Za-z_]+`)

// fastAnswer is what the comparison reads of an answer.
func fastAnswer(resp *http.Response, body string) string {
	h := resp.Header
	return fmt.Sprintf("%d\nContent-Type: %s\nCache-Control: %s\nAllow: %s\nMcp-Session-Id: %s\n\n%s",
		resp.StatusCode, h.Get("Content-Type"), h.Get("Cache-Control"), h.Get("Allow"), h.Get("Mcp-Session-Id"),
		random.ReplaceAllString(body, "<random>"))
}

// sameAnswers sends each case through the fast path and through the SDK
// (forced) on s, with extra headers (a token), and compares the answers
// byte for byte.
func sameAnswers(t *testing.T, s *server, cases []fastCase, extra ...string) {
	t.Helper()
	send := func(c fastCase, sdkOnly bool) string {
		s.api.mcpServer.SDKOnly(sdkOnly)
		defer s.api.mcpServer.SDKOnly(false)
		header := append([]string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call"}, extra...)
		resp, body := mcpRequest(t, s, c.body, false, append(header, c.header...)...)
		return fastAnswer(resp, body)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := s.api.mcpServer.FastCalls()
			fast := send(c, false)
			if took := s.api.mcpServer.FastCalls() > before; took != c.fast {
				t.Errorf("the fast path took it: %v, want %v", took, c.fast)
			}
			viaSDK := send(c, true)
			if fast != viaSDK {
				t.Errorf("fast path:\n%s\n\nSDK:\n%s", fast, viaSDK)
			}
			if c.fast && !strings.HasPrefix(fast, "200") && !strings.HasPrefix(fast, "400") {
				t.Errorf("answer %s", fast)
			}
		})
	}
}

// The fast path answers sessionless tools/call as the SDK does, byte for
// byte, and leaves to the SDK, unchanged, whatever it does not take.
func TestMCPFastPathSameAnswers(t *testing.T) {
	s, _ := startMCPGateway(t)
	sameAnswers(t, s, fastCases())
}

// With callers, the caller is the token's, over either path; a request
// without a token is refused before either.
func TestMCPFastPathCallers(t *testing.T) {
	rec := apitest.NewRecorder(t)
	p := apitest.NewPlatform(t, "k1")
	s := startCallers(t, rec.URL, p.URL)
	admin := "Bearer " + p.Token(t, "k1", apitest.GoodClaims("u_8", "admin"))
	user := "Bearer " + p.Token(t, "k1", apitest.GoodClaims("u_7", "user"))
	call := func(name, tool, meta string) fastCase {
		return fastCase{name: name, body: callBody("1", tool, `{}`, meta), header: []string{"Mcp-Name", tool}, fast: true}
	}
	cases := []fastCase{
		call("token's identity", "admin_only", fastMeta),
		call("_meta identity ignored", "admin_only", fastMeta+`,"toolgate/identity":{"user":"someone_else"}`),
	}
	t.Run("admin", func(t *testing.T) { sameAnswers(t, s, cases, "Authorization", admin) })
	t.Run("user", func(t *testing.T) { sameAnswers(t, s, cases, "Authorization", user) })
	none := []fastCase{{name: "no token", body: callBody("1", "admin_only", `{}`, fastMeta), header: []string{"Mcp-Name", "admin_only"}}}
	t.Run("no token", func(t *testing.T) { sameAnswers(t, s, none) })
}
