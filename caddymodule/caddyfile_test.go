package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/go-json-experiment/json"
	"github.com/toolgate/toolgate/internal/dispatch"

	"github.com/toolgate/toolgate/internal/jsonread"
)

// parseToolgate parses a toolgate block holding lines, which start at
// line 2 of Testfile.
func parseToolgate(lines ...string) (*Handler, error) {
	var h Handler
	err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("toolgate {\n" + strings.Join(lines, "\n") + "\n}"))
	return &h, err
}

const api = "component api http://127.0.0.1:9001"

// TestUnmarshalCaddyfile covers what the adapt golden files do not: each
// case is the JSON the block parses to.
func TestUnmarshalCaddyfile(t *testing.T) {
	for _, c := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"empty", nil, `{}`},
		{"ledger off", []string{"ledger off"}, `{"ledger":{"backend":"off"}}`},
		{"ledger bolt, default path", []string{"ledger bolt {", "fsync", "}"}, `{"ledger":{"backend":"bolt","fsync":true}}`},
		{"fsync on", []string{"ledger bolt {", "fsync on", "}"}, `{"ledger":{"backend":"bolt","fsync":true}}`},
		{"fsync off", []string{"ledger bolt /x.db {", "fsync off", "}"}, `{"ledger":{"backend":"bolt","path":"/x.db","fsync":false}}`},
		{"ledger redis", []string{"ledger redis 127.0.0.1:6379 {", "db 0", "tls", "prefix p:", "}"},
			`{"ledger":{"backend":"redis","addr":"127.0.0.1:6379","tls":true,"prefix":"p:"}}`},
		{"ledger redis, eviction and replicas", []string{"ledger redis 127.0.0.1:6379 {", "allow_eviction", "replicas 2", "}"},
			`{"ledger":{"backend":"redis","addr":"127.0.0.1:6379","allow_eviction":true,"replicas":2}}`},
		{"callers key file", []string{"callers {", "key_file /k.pem", "user_claim uid", "}"},
			`{"callers":{"key_file":"/k.pem","user_claim":"uid"}}`},
		{"pages take the token options callers take", []string{"pages {", "jwks_url https://app.example/jwks.json", "leeway 1m", "audience pages", "}"},
			`{"pages":{"jwks_url":"https://app.example/jwks.json","audience":"pages","leeway":60000000000}}`},
		{"empty blocks", []string{"identity", "callers {", "}", "pages"}, `{"identity":{},"callers":{},"pages":{}}`},
		{"repeated lists", []string{"manifest a.json", "manifest b.json", "allowed_hosts a", "allowed_hosts b c", "pages {", "origins https://a", "origins https://b", "}"},
			`{"manifests":["a.json","b.json"],"pages":{"origins":["https://a","https://b"]},"allowed_hosts":["a","b","c"]}`},
		{"sizes and timeouts", []string{"max_response_size 1KB", "max_request_size 2KiB", "upstream_timeout 0s", "client_tool_timeout 1d"},
			`{"client_tool_timeout":86400000000000,"max_response_size":1000,"max_request_size":2048}`},
		{"component on a unix socket", []string{"component api unix//run/api.sock"}, `{"components":{"api":{"base_url":"unix//run/api.sock"}}}`},
		{"mcp server by URL", []string{"mcp_server crm https://crm.example/mcp {", "tools a b", "tools c", "prefix crm_", "header X-Key {env.K}", "identity", `allow "user != 'x'"`, "timeout 5s", "max_result_size 2KiB", "}"},
			`{"mcp_servers":{"crm":{"url":"https://crm.example/mcp","tools":["a","b","c"],"prefix":"crm_","headers":{"X-Key":"{env.K}"},"identity":true,"allow":"user != 'x'","timeout":5000000000,"max_result_size":2048}}}`},
		{"mcp server by command", []string{"mcp_server files command node server.js --root /srv {", "env TOKEN {env.T}", "dir /opt/files", "}"},
			`{"mcp_servers":{"files":{"command":["node","server.js","--root","/srv"],"env":{"TOKEN":"{env.T}"},"dir":"/opt/files"}}}`},
		{"mcp server command in the block", []string{"mcp_server files {", "command node server.js", "}"}, `{"mcp_servers":{"files":{"command":["node","server.js"]}}}`},
		{"openapi", []string{"openapi api.yaml {", "server https://api.example.com", "operations a b", "prefix p_", "header X-Key {env.K}", "}", "openapi other.json {", "component api", "}"},
			`{"openapi":[{"file":"api.yaml","server":"https://api.example.com","operations":["a","b"],"prefix":"p_","headers":{"X-Key":"{env.K}"}},{"file":"other.json","component":"api"}]}`},
		{"mcp target", []string{"mcp_server crm https://crm.example/mcp", "tool find {", "description d", `input_schema {"type":"object"}`, "target mcp crm search", "}"},
			`{"tools":[{"name":"find","description":"d","input_schema":{"type":"object"},"target":{"type":"mcp","server":"crm","tool":"search"}}],"mcp_servers":{"crm":{"url":"https://crm.example/mcp"}}}`},
		{"tool", []string{api, "tool t {", "description d", `input_schema {"type":"object"}`, "target url post https://x.example/${input.a}",
			"component api", "body text", "allow true", "result body", "query a 1", "header X-B 2", "}"},
			`{"tools":[{"name":"t","description":"d","input_schema":{"type":"object"},"target":{"type":"url","component":"api","method":"POST","url":"https://x.example/${input.a}","query":{"a":"1"},"headers":{"X-B":"2"},"body":"text","result":"body"},"allow":"true"}],"components":{"api":{"base_url":"http://127.0.0.1:9001"}}}`},
		{"governance", []string{api, "limit 1000/1d per install", "limit 5 concurrent per user", "audit /var/log/toolgate/audit.jsonl", "audit_inputs",
			"tool pay {", "description d", `input_schema {"type":"object"}`, "target url post https://pay.example/pay",
			`approval "input.amount > 100" {`, `title "Approve payment"`, `description "Over 100."`, "timeout 24h", `assignee "claims.approver ?? ''"`, "}",
			"limit 20/1h per user", "}"},
			`{"tools":[{"name":"pay","description":"d","input_schema":{"type":"object"},"target":{"type":"url","method":"POST","url":"https://pay.example/pay"},"approval":{"when":"input.amount \u003e 100","title":"Approve payment","description":"Over 100.","timeout":"24h","assignee":"claims.approver ?? ''"},"limits":["20/1h per user"]}],"components":{"api":{"base_url":"http://127.0.0.1:9001"}},"limits":["1000/1d per install","5 concurrent per user"],"audit":"/var/log/toolgate/audit.jsonl","audit_inputs":true}`},
		{"approval always, in a server and a document", []string{"mcp_server crm https://crm.example/mcp {", "approval {", "title Confirm", "}", "limit 10/1m per user", "}",
			"openapi api.yaml {", "server https://api.example.com", "approval {", "title Confirm", "}", "}"},
			`{"openapi":[{"file":"api.yaml","server":"https://api.example.com","approval":{"title":"Confirm"}}],"mcp_servers":{"crm":{"url":"https://crm.example/mcp","approval":{"title":"Confirm"},"limits":["10/1m per user"]}}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, err := parseToolgate(c.lines...)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(h, jsonread.Legacy)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

// TestSubBlocksParseThemselves parses each sub-block on its own, as
// Handler.UnmarshalCaddyfile hands it over: from its first token.
func TestSubBlocksParseThemselves(t *testing.T) {
	for _, c := range []struct {
		block caddyfile.Unmarshaler
		in    string
		want  string
	}{
		{new(Component), "api http://127.0.0.1:9001 {\n\tenv A 1\n}", `{"base_url":"http://127.0.0.1:9001","env":{"A":"1"}}`},
		{new(Identity), "identity {\n\tkey k1 /k1.pem\n\tttl 2m\n}", `{"keys":[{"id":"k1","file":"/k1.pem"}],"ttl":120000000000}`},
		{new(Callers), "callers {\n\tsecret s\n\tleeway 1m\n}", `{"secret":"s","leeway":60000000000}`},
		{new(Pages), "pages {\n\tsecret s\n\tmax_pending 3\n}", `{"secret":"s","max_pending":3}`},
		{new(Ledger), "ledger redis r:1 {\n\tdb 3\n}", `{"backend":"redis","addr":"r:1","db":3}`},
	} {
		if err := c.block.UnmarshalCaddyfile(caddyfile.NewTestDispenser(c.in)); err != nil {
			t.Errorf("%T: %v", c.block, err)
			continue
		}
		if got, _ := json.Marshal(c.block, jsonread.Legacy); string(got) != c.want {
			t.Errorf("%T:\ngot  %s\nwant %s", c.block, got, c.want)
		}
	}
}

// TestUnmarshalCaddyfileErrors checks that each mistake is refused with an
// error naming the option and its line.
func TestUnmarshalCaddyfileErrors(t *testing.T) {
	var h Handler
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("toolgate x {\n}")); err == nil ||
		err.Error() != "wrong argument count or unexpected line ending after 'x', at Testfile:1" {
		t.Errorf("toolgate x: %v", err)
	}

	schema := "input_schema `{\"type\":\"object\"}`"
	for _, c := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"unknown option", []string{"frobnicate"}, "unrecognized subdirective frobnicate, at Testfile:2"},
		{"bad limit", []string{"limit 20 an hour"}, `limit "20 an hour": want "N/WINDOW per user|install" or "N concurrent per user|install", at Testfile:2`},
		{"twin limits", []string{"limit 20/1h per user", "limit 30/60m per user"}, `limits "20/1h per user" and "30/60m per user" count the same calls (the same window and scope): keep one, at Testfile:3`},
		{"audit_inputs without audit", []string{"audit_inputs"}, "audit_inputs needs an audit file: audit FILE, at Testfile:3"},
		{"two audit files", []string{"audit a", "audit b"}, "audit already specified, at Testfile:3"},
		{"approval without title", []string{"tool t {", "approval {", "timeout 1h", "}", "}"}, `tool t: approval: a title is required: approval "CONDITION" { title "…" }, at Testfile:5`},
		{"approval with two conditions", []string{"tool t {", "approval a b {", "}", "}"}, `tool t: want: approval ["CONDITION"] { title "…" … }, at Testfile:3`},
		{"approval bad timeout", []string{"tool t {", "approval {", "title T", "timeout 40d", "}", "}"}, `tool t: approval timeout: "40d": at most 30d, at Testfile:6`},
		{"approval unknown option", []string{"tool t {", "approval {", "title T", "approver x", "}", "}"}, "unrecognized approval subdirective approver, at Testfile:5"},
		{"two approvals", []string{"tool t {", "approval {", "title T", "}", "approval {", "title U", "}", "}"}, "tool t: approval already specified, at Testfile:6"},
		{"tool bad limit", []string{"tool t {", "limit 20/1w per user", "}"}, `tool t: limit "20/1w per user": window "1w": the unit is s, m, h or d, at Testfile:3`},
		{"renamed option", []string{"mcp_allowed_hosts a"}, "mcp_allowed_hosts was renamed: use allowed_hosts, which now applies to every runtime endpoint, at Testfile:2"},
		{"manifest without file", []string{"manifest"}, "wrong argument count or unexpected line ending after 'manifest', at Testfile:2"},
		{"manifest with two files", []string{"manifest a b"}, "wrong argument count or unexpected line ending after 'b', at Testfile:2"},
		{"allowed_hosts without host", []string{"allowed_hosts"}, "wrong argument count or unexpected line ending after 'allowed_hosts', at Testfile:2"},
		{"zero client_tool_timeout", []string{"client_tool_timeout 0"}, "bad client_tool_timeout 0, at Testfile:2"},
		{"client_tool_timeout twice over", []string{"client_tool_timeout 1s 2s"}, "wrong argument count or unexpected line ending after '2s', at Testfile:2"},
		{"bad upstream_timeout", []string{"upstream_timeout soon"}, `bad upstream_timeout soon: time: invalid duration "soon", at Testfile:2`},
		{"zero size", []string{"max_response_size 0"}, "bad max_response_size 0: want a size such as 1MiB, at Testfile:2"},
		{"negative size", []string{"max_request_size -1KiB"}, "bad max_request_size -1KiB: want a size such as 1MiB, at Testfile:2"},
		{"size past int64", []string{"max_request_size 10EiB"}, "bad max_request_size 10EiB: want a size such as 1MiB, at Testfile:2"},
		{"size without value", []string{"max_request_size"}, "wrong argument count or unexpected line ending after 'max_request_size', at Testfile:2"},

		{"component without url", []string{"component api"}, "wrong argument count or unexpected line ending after 'api', at Testfile:2"},
		{"component twice", []string{api, api}, "component api already specified, at Testfile:3"},
		{"env without value", []string{api + " {", "env A", "}"}, "wrong argument count or unexpected line ending after 'A', at Testfile:3"},
		{"env twice", []string{api + " {", "env A 1", "env A 2", "}"}, "env A already specified, at Testfile:4"},
		{"unknown component option", []string{api + " {", "base x", "}"}, "unrecognized component subdirective base, at Testfile:3"},
		{"bad base url", []string{"component api 127.0.0.1:9001"}, `component "api": base URL "127.0.0.1:9001": parse "127.0.0.1:9001": first path segment in URL cannot contain colon, at Testfile:3`},
		{"relative socket", []string{"component api unix/api.sock"}, `component "api": address "unix/api.sock": the socket path must be absolute (want unix//ABSOLUTE/PATH), at Testfile:3`},
		{"empty socket", []string{"component api unix/"}, `component "api": address "unix/": the socket path is empty (want unix//ABSOLUTE/PATH), at Testfile:3`},
		{"socket with a query", []string{"component api unix//run/api.sock?v=1"}, `component "api": address "unix//run/api.sock?v=1": a socket address has no query or fragment (want unix//ABSOLUTE/PATH), at Testfile:3`},
		{"socket with user info", []string{"component api unix//u@run/api.sock"}, `component "api": address "unix//u@run/api.sock": a socket address has no user info (want unix//ABSOLUTE/PATH), at Testfile:3`},

		{"identity with an argument", []string{"identity x"}, "wrong argument count or unexpected line ending after 'x', at Testfile:2"},
		{"identity twice", []string{"identity", "identity"}, "identity already specified, at Testfile:3"},
		{"identity key without file", []string{"identity {", "key k1", "}"}, "wrong argument count or unexpected line ending after 'k1', at Testfile:3"},
		{"identity issuer without value", []string{"identity {", "issuer", "}"}, "wrong argument count or unexpected line ending after 'issuer', at Testfile:3"},
		{"bad ttl", []string{"identity {", "ttl long", "}"}, `bad ttl long: time: invalid duration "long", at Testfile:3`},
		{"unknown identity option", []string{"identity {", "kid x", "}"}, "unrecognized identity subdirective kid, at Testfile:3"},
		{"unknown identity option without value", []string{"identity {", "kid", "}"}, "unrecognized identity subdirective kid, at Testfile:3"},

		{"callers twice", []string{"callers", "callers"}, "callers already specified, at Testfile:3"},
		{"callers secret twice over", []string{"callers {", "secret a b", "}"}, "wrong argument count or unexpected line ending after 'b', at Testfile:3"},
		{"bad leeway", []string{"callers {", "leeway x", "}"}, `bad leeway x: time: invalid duration "x", at Testfile:3`},
		{"unknown callers option", []string{"callers {", "jwks x", "}"}, "unrecognized callers subdirective jwks, at Testfile:3"},

		{"zero session_idle_timeout", []string{"mcp {", "session_idle_timeout 0", "}"}, "bad session_idle_timeout 0, at Testfile:3"},
		{"negative session_idle_timeout", []string{"mcp {", "session_idle_timeout -1m", "}"}, "bad session_idle_timeout -1m, at Testfile:3"},
		{"session_idle_timeout without value", []string{"mcp {", "session_idle_timeout", "}"}, "wrong argument count or unexpected line ending after 'session_idle_timeout', at Testfile:3"},
		{"zero max_sessions_per_caller", []string{"mcp {", "max_sessions_per_caller 0", "}"}, "bad max_sessions_per_caller 0: want a positive integer, at Testfile:3"},
		{"negative max_sessions", []string{"mcp {", "max_sessions -5", "}"}, "bad max_sessions -5: want a positive integer, at Testfile:3"},
		{"max_sessions not a number", []string{"mcp {", "max_sessions lots", "}"}, "bad max_sessions lots: want a positive integer, at Testfile:3"},

		{"pages twice", []string{"pages", "pages"}, "pages already specified, at Testfile:3"},
		{"pages origins without origin", []string{"pages {", "origins", "}"}, "wrong argument count or unexpected line ending after 'origins', at Testfile:3"},
		{"pages secret without value", []string{"pages {", "secret", "}"}, "wrong argument count or unexpected line ending after 'secret', at Testfile:3"},
		{"zero max_pending", []string{"pages {", "max_pending 0", "}"}, "bad max_pending 0: want a positive integer, at Testfile:3"},
		{"unknown pages option", []string{"pages {", "origin x", "}"}, "unrecognized pages subdirective origin, at Testfile:3"},

		{"ledger without backend", []string{"ledger"}, "wrong argument count or unexpected line ending after 'ledger', at Testfile:2"},
		{"ledger twice", []string{"ledger off", "ledger off"}, "ledger already specified, at Testfile:3"},
		{"unknown backend", []string{"ledger sqlite"}, "want: ledger bolt [path] | ledger redis <addr> | ledger off, at Testfile:2"},
		{"redis without addr", []string{"ledger redis"}, "want: ledger bolt [path] | ledger redis <addr> | ledger off, at Testfile:2"},
		{"off with a path", []string{"ledger off /x"}, "want: ledger bolt [path] | ledger redis <addr> | ledger off, at Testfile:2"},
		{"fsync on redis", []string{"ledger redis a:1 {", "fsync", "}"}, "ledger redis takes no fsync, at Testfile:3"},
		{"fsync off on redis", []string{"ledger redis a:1 {", "fsync off", "}"}, "ledger redis takes no fsync, at Testfile:3"},
		{"fsync with another value", []string{"ledger bolt {", "fsync yes", "}"}, "want: fsync [on | off], at Testfile:3"},
		{"fsync with two values", []string{"ledger bolt {", "fsync on off", "}"}, "want: fsync [on | off], at Testfile:3"},
		{"fsync twice", []string{"ledger bolt {", "fsync off", "fsync", "}"}, "fsync already specified, at Testfile:4"},
		{"tls on bolt", []string{"ledger bolt {", "tls", "}"}, "tls is a flag of ledger redis, at Testfile:3"},
		{"allow_eviction on bolt", []string{"ledger bolt {", "allow_eviction", "}"}, "allow_eviction is a flag of ledger redis, at Testfile:3"},
		{"allow_eviction with a value", []string{"ledger redis a:1 {", "allow_eviction yes", "}"}, "allow_eviction is a flag of ledger redis, at Testfile:3"},
		{"replicas on bolt", []string{"ledger bolt {", "replicas 1", "}"}, "ledger bolt takes no replicas, at Testfile:3"},
		{"zero replicas", []string{"ledger redis a:1 {", "replicas 0", "}"}, "bad replicas 0: want a positive integer, at Testfile:3"},
		{"replicas without a number", []string{"ledger redis a:1 {", "replicas", "}"}, "wrong argument count or unexpected line ending after 'replicas', at Testfile:3"},
		{"password on bolt", []string{"ledger bolt {", "password p", "}"}, "ledger bolt takes no password, at Testfile:3"},
		{"retention on off", []string{"ledger off {", "retention 1h", "}"}, "ledger off takes no retention, at Testfile:3"},
		{"fsync on off", []string{"ledger off {", "fsync", "}"}, "ledger off takes no fsync, at Testfile:3"},
		{"db on bolt without value", []string{"ledger bolt {", "db", "}"}, "ledger bolt takes no db, at Testfile:3"},
		{"zero retention", []string{"ledger bolt {", "retention 0s", "}"}, "bad retention 0s, at Testfile:3"},
		{"bad max_result_size", []string{"ledger bolt {", "max_result_size lots", "}"}, "bad max_result_size lots: want a size such as 1MiB, at Testfile:3"},
		{"zero max_result_size", []string{"ledger bolt {", "max_result_size 0", "}"}, "bad max_result_size 0: want a size such as 1MiB, at Testfile:3"},
		{"max_result_size on off", []string{"ledger off {", "max_result_size 1MiB", "}"}, "ledger off takes no max_result_size, at Testfile:3"},
		{"negative db", []string{"ledger redis a:1 {", "db -1", "}"}, "bad db -1, at Testfile:3"},
		{"ledger option without value", []string{"ledger redis a:1 {", "prefix", "}"}, "wrong argument count or unexpected line ending after 'prefix', at Testfile:3"},
		{"unknown ledger option", []string{"ledger bolt {", "sync 1", "}"}, "unrecognized ledger subdirective sync, at Testfile:3"},

		{"tool without name", []string{"tool {", "}"}, "wrong argument count or unexpected line ending after 'tool', at Testfile:2"},
		{"tool with two names", []string{"tool a b"}, "wrong argument count or unexpected line ending after 'b', at Testfile:2"},
		{"tool description twice", []string{"tool t {", "description a", "description b", "}"}, "tool t: description already specified, at Testfile:4"},
		{"tool target twice", []string{"tool t {", "target kazzle a", "target kazzle b", "}"}, "tool t: target already specified, at Testfile:4"},
		{"tool description with two words", []string{"tool t {", "description a b", "}"}, "wrong argument count or unexpected line ending after 'b', at Testfile:3"},
		{"tool bad schema", []string{"tool t {", `input_schema "{x"`, "}"}, "tool t: input_schema is not valid JSON, at Testfile:3"},
		{"tool query twice", []string{"tool t {", "query a 1", "query a 2", "}"}, "tool t: query a already specified, at Testfile:4"},
		{"tool header without value", []string{"tool t {", "header X-A", "}"}, "wrong argument count or unexpected line ending after 'X-A', at Testfile:3"},
		{"target without type", []string{"tool t {", "target", "}"}, "wrong argument count or unexpected line ending after 'target', at Testfile:3"},
		{"app target short", []string{"tool t {", "target app api GET", "}"}, "want: target app <component> <method> <path>, at Testfile:3"},
		{"url target short", []string{"tool t {", "target url https://x", "}"}, "want: target url <method> <url>, at Testfile:3"},
		{"kazzle target long", []string{"tool t {", "target kazzle a b", "}"}, "want: target kazzle <client_tool>, at Testfile:3"},
		{"unknown target", []string{"tool t {", "target grpc x", "}"}, "unknown target type grpc (want app, url, kazzle or mcp), at Testfile:3"},
		{"unknown tool option", []string{"tool t {", "method GET", "}"}, "unrecognized tool subdirective method, at Testfile:3"},
		{"mcp target short", []string{"tool t {", "target mcp crm", "}"}, "want: target mcp <mcp_server> <tool>, at Testfile:3"},
		{"mcp server twice", []string{"mcp_server a https://a.example", "mcp_server a https://b.example"}, "mcp_server a already specified, at Testfile:3"},
		{"mcp server without name", []string{"mcp_server"}, "wrong argument count or unexpected line ending after 'mcp_server', at Testfile:2"},
		{"mcp server with two URLs", []string{"mcp_server a https://a.example https://b.example"}, "want: mcp_server <name> <url> | mcp_server <name> command <program> [<args>…], at Testfile:2"},
		{"mcp server command without program", []string{"mcp_server a command"}, "want: mcp_server <name> <url> | mcp_server <name> command <program> [<args>…], at Testfile:2"},
		{"mcp server unknown option", []string{"mcp_server a https://a.example {", "retries 3", "}"}, "unrecognized mcp_server subdirective retries, at Testfile:3"},
		{"mcp server identity with a value", []string{"mcp_server a https://a.example {", "identity on", "}"}, "wrong argument count or unexpected line ending after 'on', at Testfile:3"},
		{"mcp server zero timeout", []string{"mcp_server a https://a.example {", "timeout 0s", "}"}, "bad timeout 0s, at Testfile:3"},
		{"mcp target on an undeclared server", []string{"tool t {", "description d", schema, "target mcp crm search", "}"},
			`Testfile:2: tool "t": target: mcp target: mcp server "crm" is not declared`},
		{"tool that does not compile", []string{api, "", "tool t {", "description d", schema, "target app nope GET /", "}"},
			`Testfile:4: tool "t": target: app target: component "nope" is not declared`},
		{"tool declared twice", []string{api, "tool t {", "description d", schema, "target app api GET /", "}", "tool t {", "description d", schema, "target app api GET /", "}"},
			`Testfile:8: tool "t": duplicate name, already declared at line 3`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseToolgate(c.lines...)
			if err == nil || err.Error() != c.want {
				t.Errorf("got  %v\nwant %s", err, c.want)
			}
		})
	}
}

// TestTargetLinesSpellEveryKind: each target kind has its Caddyfile
// spelling, and no spelling names a kind that is not one.
func TestTargetLinesSpellEveryKind(t *testing.T) {
	kinds := dispatch.Kinds()
	for _, k := range kinds {
		if _, ok := targetLines[k.Name()]; !ok {
			t.Errorf("target kind %q has no Caddyfile spelling in targetLines", k.Name())
		}
	}
	for name := range targetLines {
		if _, ok := dispatch.KindOf(name); !ok {
			t.Errorf("targetLines spells %q, which is no target kind", name)
		}
	}
	if len(targetLines) != len(kinds) {
		t.Errorf("%d spellings for %d kinds", len(targetLines), len(kinds))
	}
}
