package result_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/mapping"
	"github.com/toolgate/toolgate/internal/result"
)

func TestCompileMappingErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"syntax error", `body.`, "unexpected"},
		{"unclosed map", `{"content": body.title`, ""},
		{"unknown variable", `response.title`, "response"},
		{"unknown function", `render(body)`, "render"},
		{"Go field name instead of tag", `Body.title`, "Body"},
		{"type mismatch", `status + "x"`, ""},
		{"empty", ``, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := mapping.Compile(tt.src)
			if err == nil {
				t.Fatalf("CompileMapping(%q) succeeded", tt.src)
			}
			if m != nil {
				t.Error("a Mapping returned with an error")
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("result %q", tt.src)) {
				t.Errorf("error %q does not name the expression %q", err, tt.src)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
}

func jsonHeader() http.Header {
	h := http.Header{}
	h.Set("content-type", "application/json") // stored as Content-Type
	h.Set("x-request-id", "req-7")
	h.Add("x-multi", "first")
	h.Add("x-multi", "second")
	return h
}

func TestMappingApply(t *testing.T) {
	textHeader := http.Header{"Content-Type": {"text/plain"}}
	tests := []struct {
		name   string
		src    string
		status int
		header http.Header
		body   string
		want   result.Result
	}{
		{name: "field to content", src: `body.title`, body: `{"title": "Hello"}`,
			want: result.Result{Content: "Hello"}},
		{name: "nested field", src: `body.data.items[1].name`, body: `{"data": {"items": [{"name": "a"}, {"name": "b"}]}}`,
			want: result.Result{Content: "b"}},
		{name: "map with markdown", src: `{"content": body.title, "markdown": "**" + body.title + "**"}`, body: `{"title": "Hello"}`,
			want: result.Result{Content: "Hello", Markdown: "**Hello**", Card: result.CardMarkdown}},
		{name: "map with embedUrl", src: `{"content": body.title, "embedUrl": body.url}`, body: `{"title": "Map", "url": "https://maps.test/e/1"}`,
			want: result.Result{Content: "Map", EmbedURL: "https://maps.test/e/1", Card: result.CardEmbed}},
		{name: "map with all three: embed wins", src: `{"content": "c", "markdown": "m", "embedUrl": "http://x.test/"}`, body: `{}`,
			want: result.Result{Content: "c", Markdown: "m", EmbedURL: "http://x.test/", Card: result.CardEmbed}},
		{name: "map with nil channels", src: `{"content": "c", "markdown": nil, "embedUrl": nil}`, body: `{}`,
			want: result.Result{Content: "c"}},
		{name: "map with empty markdown", src: `{"content": "c", "markdown": ""}`, body: `{}`,
			want: result.Result{Content: "c"}},
		{name: "map with extra keys", src: `{"content": "c", "other": 1}`, body: `{}`,
			want: result.Result{Content: "c"}},
		{name: "isError false", src: `{"content": "c", "markdown": "m", "isError": false}`, body: `{}`,
			want: result.Result{Content: "c", Markdown: "m", Card: result.CardMarkdown}},
		{name: "isError true passes through", src: `{"content": "failed: " + body.error, "isError": true}`, body: `{"error": "nope"}`,
			want: result.Result{IsError: true, Content: "failed: nope"}},
		{name: "string result", src: `"done"`, body: `{"ignored": true}`,
			want: result.Result{Content: "done"}},
		{name: "empty string result", src: `""`, body: `{}`,
			want: result.Result{Content: ""}},
		{name: "non-JSON body as a string", src: `body`, header: textHeader, body: "plain text, not JSON",
			want: result.Result{Content: "plain text, not JSON"}},
		{name: "non-JSON body used in a string", src: `"got: " + upper(body)`, header: textHeader, body: "abc",
			want: result.Result{Content: "got: ABC"}},
		{name: "JSON string body", src: `body + "!"`, body: `"quoted"`,
			want: result.Result{Content: "quoted!"}},
		{name: "JSON array body", src: `join(map(body, #.n), ",")`, body: `[{"n": "a"}, {"n": "b"}]`,
			want: result.Result{Content: "a,b"}},
		{name: "JSON numbers are float64", src: `body.count * 2 == 84 ? "yes" : "no"`, body: `{"count": 42}`,
			want: result.Result{Content: "yes"}},
		{name: "Content-Type header", src: `headers["Content-Type"]`, header: jsonHeader(), body: `{}`,
			want: result.Result{Content: "application/json"}},
		{name: "canonical header name", src: `headers["X-Request-Id"]`, header: jsonHeader(), body: `{}`,
			want: result.Result{Content: "req-7"}},
		{name: "first value of a repeated header", src: `headers["X-Multi"]`, header: jsonHeader(), body: `{}`,
			want: result.Result{Content: "first"}},
		{name: "missing header", src: `"[" + headers["X-None"] + "]"`, header: jsonHeader(), body: `{}`,
			want: result.Result{Content: "[]"}},
		{name: "status", src: `status == 201 ? "created " + string(status) : "other"`, status: 201, body: `{}`,
			want: result.Result{Content: "created 201"}},
		{name: "status 204 empty body", src: `body == "" ? "no content" : "some"`, status: 204, body: ``,
			want: result.Result{Content: "no content"}},
		{name: "header with no values", src: `body.title`, header: http.Header{"X-Empty": {}}, body: `{"title": "t"}`,
			want: result.Result{Content: "t"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := mapping.Compile(tt.src)
			if err != nil {
				t.Fatalf("CompileMapping: %v", err)
			}
			status := tt.status
			if status == 0 {
				status = 200
			}
			header := tt.header
			if header == nil {
				header = jsonHeader()
			}
			if got := m.Apply(status, header, []byte(tt.body)); !got.Equal(tt.want) {
				t.Errorf("Apply = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// isError true with channels: no card, whatever the channels.
func TestMappingIsErrorNoCard(t *testing.T) {
	m, err := mapping.Compile(`{"content": "broke", "markdown": "**m**", "embedUrl": "https://x.test/", "isError": true}`)
	if err != nil {
		t.Fatal(err)
	}
	got := m.Apply(200, jsonHeader(), []byte(`{}`))
	if !got.IsError || got.Content != "broke" || got.Card != "" {
		t.Errorf("Apply = %+v, want an error result %q without a card", got, "broke")
	}
}

// A non-2xx answer fails as it would without a mapping, whatever the
// mapping says.
func TestMappingNon2xx(t *testing.T) {
	m, err := mapping.Compile(`{"content": "mapped anyway"}`)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
		want        string
	}{
		{"domain error", 404, "application/json", `{"code": "not_found", "error": "no such note"}`, "handler answered 404 Not Found: not_found: no such note"},
		{"problem+json domain error", 409, "application/problem+json", `{"code": "conflict", "error": "taken"}`, "handler answered 409 Conflict: conflict: taken"},
		{"text error", 500, "text/plain", "database down\n", "handler answered 500 Internal Server Error: database down"},
		{"JSON without code", 400, "application/json", `{"message": "bad"}`, `handler answered 400 Bad Request: {"message": "bad"}`},
		{"empty", 503, "", "", "handler answered 503 Service Unavailable"},
		{"redirect", 302, "text/html", "", "handler answered 302 Found"},
		{"informational", 101, "", "", "handler answered 101 Switching Protocols"},
		{"300", 300, "", "", "handler answered 300 Multiple Choices"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.contentType != "" {
				h.Set("Content-Type", tt.contentType)
			}
			got := m.Apply(tt.status, h, []byte(tt.body))
			checkError(t, got)
			if got.Content != tt.want {
				t.Errorf("content = %q, want %q", got.Content, tt.want)
			}
			if plain := result.Normalize(tt.status, tt.contentType, []byte(tt.body)); !got.Equal(plain) {
				t.Errorf("Apply = %+v, Normalize = %+v: want the same", got, plain)
			}
		})
	}
}

func TestMappingBrokenRules(t *testing.T) {
	tests := []struct {
		name string
		src  string
		body string
		want string
	}{
		{"no content", `{"markdown": "**x**"}`, `{}`, `no string "content"`},
		{"content not a string", `{"content": body.n}`, `{"n": 1}`, `no string "content"`},
		{"content nil", `{"content": body.missing}`, `{}`, `no string "content"`},
		{"markdown not a string", `{"content": "c", "markdown": 5}`, `{}`, `gave a "markdown" that is not a string`},
		{"markdown an object", `{"content": "c", "markdown": body}`, `{"a": 1}`, `gave a "markdown" that is not a string`},
		{"embedUrl not a string", `{"content": "c", "embedUrl": true}`, `{}`, `gave a "embedUrl" that is not a string`},
		{"relative embedUrl", `{"content": "c", "embedUrl": "/embed/1"}`, `{}`, `invalid "embedUrl"`},
		{"javascript embedUrl", `{"content": "c", "embedUrl": "javascript:alert(1)"}`, `{}`, `invalid "embedUrl"`},
		{"embedUrl without host", `{"content": "c", "embedUrl": "https:///x"}`, `{}`, `invalid "embedUrl"`},
		{"isError not a bool", `{"content": "c", "isError": "yes"}`, `{}`, `"isError" that is not a bool`},
		{"a number", `body.count`, `{"count": 3}`, "gave float64: want a string or a map"},
		{"nil", `body.missing`, `{}`, "gave <nil>: want a string or a map"},
		{"a bool", `status == 200`, `{}`, "gave bool: want a string or a map"},
		{"a list", `[body.title]`, `{"title": "t"}`, "gave []interface {}: want a string or a map"},
		{"member of a missing key", `body.a.b`, `{}`, "the result mapping failed: cannot fetch b from <nil>"},
		{"string plus number", `body.title + body.n`, `{"title": "t", "n": 1}`, "the result mapping failed: invalid operation"},
		{"index out of range", `body.items[3]`, `{"items": []}`, "the result mapping failed: index out of range"},
		{"member of a non-JSON body", `body.title`, `<html>`, "the result mapping failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := mapping.Compile(tt.src)
			if err != nil {
				t.Fatalf("CompileMapping: %v", err)
			}
			got := m.Apply(200, jsonHeader(), []byte(tt.body))
			checkError(t, got)
			if !strings.Contains(got.Content, tt.want) {
				t.Errorf("content %q does not say %q", got.Content, tt.want)
			}
		})
	}
}

// One compiled mapping serves many answers.
func TestMappingReused(t *testing.T) {
	m, err := mapping.Compile(`{"content": body.title, "markdown": "# " + body.title}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, title := range []string{"one", "two", "three"} {
		got := m.Apply(200, jsonHeader(), []byte(`{"title": "`+title+`"}`))
		if got.Content != title || got.Markdown != "# "+title || got.Card != result.CardMarkdown {
			t.Errorf("Apply = %+v for title %q", got, title)
		}
	}
}
