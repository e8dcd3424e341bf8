package result_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/jsonread/legacyjson"
	"github.com/toolgate/toolgate/internal/result"
)

func TestNormalizeOK(t *testing.T) {
	tests := []struct {
		name   string
		status int
		ct     string
		body   string
		want   result.Result
	}{
		{"text/plain", 200, "text/plain", "hello", result.Result{Content: "hello"}},
		{"text/plain with charset", 200, "text/plain; charset=utf-8", "héllo\n", result.Result{Content: "héllo\n"}},
		{"text/html is content as is", 200, "text/html", "<b>x</b>", result.Result{Content: "<b>x</b>"}},
		{"no content type is content even when it looks like JSON", 200, "", `{"content":"x","markdown":"m"}`, result.Result{Content: `{"content":"x","markdown":"m"}`}},
		{"other non-JSON type", 200, "application/octet-stream", "bytes", result.Result{Content: "bytes"}},
		{"unparsable content type is text", 200, "%%%", `{"content":"x"}`, result.Result{Content: `{"content":"x"}`}},
		{"empty text", 200, "text/plain", "", result.Result{Content: ""}},
		{"204 no content", 204, "", "", result.Result{Content: ""}},
		{"299 is 2xx", 299, "text/plain", "ok", result.Result{Content: "ok"}},
		{
			"content only", 200, "application/json", `{"content":"the answer"}`,
			result.Result{Content: "the answer"},
		},
		{
			"only markdown shows markdown", 200, "application/json", `{"content":"c","markdown":"**m** [x](https://a.example)"}`,
			result.Result{Content: "c", Markdown: "**m** [x](https://a.example)", Card: result.CardMarkdown},
		},
		{
			"only embedUrl shows embed", 201, "application/json", `{"content":"c","embedUrl":"https://app.example/view/1"}`,
			result.Result{Content: "c", EmbedURL: "https://app.example/view/1", Card: result.CardEmbed},
		},
		{
			"both: embedUrl wins, both kept", 200, "application/json", `{"content":"c","markdown":"m","embedUrl":"http://app.example:8080/v?a=1#f"}`,
			result.Result{Content: "c", Markdown: "m", EmbedURL: "http://app.example:8080/v?a=1#f", Card: result.CardEmbed},
		},
		{
			"unknown keys dropped", 200, "application/json", `{"content":"c","extra":{"x":1},"isError":true,"card":"embed","type":"note"}`,
			result.Result{Content: "c"},
		},
		{
			"null markdown and embedUrl are absent", 200, "application/json", `{"content":"c","markdown":null,"embedUrl":null}`,
			result.Result{Content: "c"},
		},
		{
			"empty markdown shows no card", 200, "application/json", `{"content":"c","markdown":""}`,
			result.Result{Content: "c"},
		},
		{
			"empty content string is a string", 200, "application/json", `{"content":""}`,
			result.Result{Content: ""},
		},
		{
			"escapes decoded", 200, "application/json", `{"content":"a\nb \u00e9 \"q\""}`,
			result.Result{Content: "a\nb é \"q\""},
		},
		{
			"charset parameter is still JSON", 200, "application/json; charset=utf-8", `{"content":"c"}`,
			result.Result{Content: "c"},
		},
		{
			"malformed parameter is still JSON", 200, "application/json; charset", `{"content":"c"}`,
			result.Result{Content: "c"},
		},
		{
			"problem+json is JSON", 200, "application/problem+json", `{"content":"c","markdown":"m"}`,
			result.Result{Content: "c", Markdown: "m", Card: result.CardMarkdown},
		},
		{
			"media type is case insensitive", 200, "Application/JSON", `{"content":"c"}`,
			result.Result{Content: "c"},
		},
		{
			"whitespace around the object", 200, "application/json", " \n{\"content\":\"c\"}\n",
			result.Result{Content: "c"},
		},
		{
			"upper-case scheme is still http(s)", 200, "application/json", `{"content":"c","embedUrl":"HTTPS://app.example/x"}`,
			result.Result{Content: "c", EmbedURL: "HTTPS://app.example/x", Card: result.CardEmbed},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := result.Normalize(tt.status, tt.ct, []byte(tt.body))
			if !got.Equal(tt.want) {
				t.Errorf("Normalize(%d, %q, %s) =\n  %+v\nwant\n  %+v", tt.status, tt.ct, tt.body, got, tt.want)
			}
		})
	}
}

func TestNormalizeBrokenRules(t *testing.T) {
	tests := []struct {
		name   string
		status int
		ct     string
		body   string
		want   []string // all must appear in the error content
	}{
		{"JSON without content", 200, "application/json", `{"markdown":"m"}`, []string{`without "content"`}},
		{"empty object", 200, "application/json", `{}`, []string{`without "content"`}},
		{"content is a number", 200, "application/json", `{"content":42}`, []string{`"content" that is not a string`}},
		{"content is an object", 200, "application/json", `{"content":{"text":"x"}}`, []string{`"content" that is not a string`}},
		{"content is null", 200, "application/json", `{"content":null}`, []string{`"content" that is not a string`}},
		{"content is bool", 200, "application/json", `{"content":true}`, []string{`"content" that is not a string`}},
		{"JSON null", 200, "application/json", `null`, []string{"null", `string "content"`}},
		{"JSON array", 200, "application/json", `[{"content":"x"}]`, []string{"not an object"}},
		{"JSON string", 200, "application/json", `"just text"`, []string{"not an object"}},
		{"JSON number", 200, "application/json", `7`, []string{"not an object"}},
		{"invalid JSON", 200, "application/json", `{"content":`, []string{"invalid JSON"}},
		{"text under a JSON type", 200, "application/json", `hello`, []string{"invalid JSON"}},
		{"empty JSON body", 200, "application/json", ``, []string{"invalid JSON"}},
		{"trailing data", 200, "application/json", `{"content":"a"} {"content":"b"}`, []string{"invalid JSON"}},
		{"markdown not a string", 200, "application/json", `{"content":"c","markdown":["m"]}`, []string{`"markdown" that is not a string`}},
		{"embedUrl not a string", 200, "application/json", `{"content":"c","embedUrl":1}`, []string{`"embedUrl" that is not a string`}},
		{"embedUrl relative path", 200, "application/json", `{"content":"c","embedUrl":"/view/1"}`, []string{`invalid "embedUrl"`, "/view/1", "absolute http(s)"}},
		{"embedUrl bare name", 200, "application/json", `{"content":"c","embedUrl":"view.html"}`, []string{`invalid "embedUrl"`, "absolute http(s)"}},
		{"embedUrl scheme-relative", 200, "application/json", `{"content":"c","embedUrl":"//app.example/x"}`, []string{`invalid "embedUrl"`, "absolute http(s)"}},
		{"embedUrl javascript", 200, "application/json", `{"content":"c","embedUrl":"javascript:alert(1)"}`, []string{`invalid "embedUrl"`, "absolute http(s)"}},
		{"embedUrl data", 200, "application/json", `{"content":"c","embedUrl":"data:text/html,<script>x</script>"}`, []string{`invalid "embedUrl"`}},
		{"embedUrl ftp", 200, "application/json", `{"content":"c","embedUrl":"ftp://app.example/x"}`, []string{`invalid "embedUrl"`, "absolute http(s)"}},
		{"embedUrl without host", 200, "application/json", `{"content":"c","embedUrl":"https:///x"}`, []string{`invalid "embedUrl"`}},
		{"embedUrl opaque https", 200, "application/json", `{"content":"c","embedUrl":"https:app.example"}`, []string{`invalid "embedUrl"`}},
		{"embedUrl empty", 200, "application/json", `{"content":"c","embedUrl":""}`, []string{`invalid "embedUrl"`}},
		{"embedUrl unparsable", 200, "application/json", `{"content":"c","embedUrl":"https://a b.example/"}`, []string{`invalid "embedUrl"`, "does not parse"}},
		{"embedUrl control character", 200, "application/json", `{"content":"c","embedUrl":"https://app.example/\u0000"}`, []string{`invalid "embedUrl"`}},
		{"embedUrl checked with markdown too", 200, "application/json", `{"content":"c","markdown":"m","embedUrl":"/x"}`, []string{`invalid "embedUrl"`}},
		{"non-UTF-8 text", 200, "text/plain", "caf\xe9", []string{"not UTF-8", "text/plain"}},
		{"non-UTF-8 without a type", 200, "", "\xff\xfe\x00", []string{"3 bytes", "not UTF-8"}},
		{"action required card", 200, "application/json", `{"type":"action_required","title":"Approve?","elements":[{"type":"button","id":"ok","label":"OK"}]}`, []string{"action-required"}},
		{"action required card with content", 200, "application/json", `{"type":"action_required","content":"x","title":"t","elements":[]}`, []string{"action-required"}},
		{"action required with escaped type", 200, "application/json", `{"type":"action\u005frequired","content":"x","title":"t","elements":[]}`, []string{"action-required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := result.Normalize(tt.status, tt.ct, []byte(tt.body))
			checkError(t, got)
			for _, w := range tt.want {
				if !strings.Contains(got.Content, w) {
					t.Errorf("Normalize(%d, %q, %q).Content = %q, want it to say %q", tt.status, tt.ct, tt.body, got.Content, w)
				}
			}
		})
	}
}

// checkError asserts r is an error result with a readable message and no card.
func checkError(t *testing.T, r result.Result) {
	t.Helper()
	if !r.IsError {
		t.Fatalf("result %+v is not an error", r)
	}
	if r.Content == "" || !utf8.ValidString(r.Content) {
		t.Errorf("error result content %q is empty or not UTF-8", r.Content)
	}
	if r.Markdown != "" || r.EmbedURL != "" || r.Card != "" {
		t.Errorf("error result %+v carries card channels", r)
	}
}

func TestNormalizeStatus(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		ct      string
		body    string
		want    []string
		notWant []string
	}{
		{"500 text", 500, "text/plain", "boom", []string{"500", "Internal Server Error", "boom"}, nil},
		{"domain error", 404, "application/json", `{"code":"order_not_found","error":"no order 17"}`, []string{"404", "order_not_found", "no order 17"}, []string{"{"}},
		{"domain error with charset", 409, "application/json; charset=utf-8", `{"code":"conflict","error":"already paid","extra":1}`, []string{"409", "conflict", "already paid"}, []string{"extra"}},
		{"domain error as problem+json", 422, "application/problem+json", `{"code":"invalid","error":"amount < 0"}`, []string{"422", "invalid", "amount < 0"}, nil},
		{"non-2xx with content is still an error", 400, "application/json", `{"content":"looks fine"}`, []string{"400", "looks fine"}, nil},
		{"code without error is quoted", 500, "application/json", `{"code":"x"}`, []string{"500", `{"code":"x"}`}, nil},
		{"code not a string is quoted", 500, "application/json", `{"code":5,"error":"e"}`, []string{"500", `{"code":5,"error":"e"}`}, nil},
		{"domain error shape under text type is quoted", 500, "text/plain", `{"code":"c","error":"e"}`, []string{"500", `{"code":"c","error":"e"}`}, nil},
		{"invalid JSON error body quoted", 503, "application/json", `oops`, []string{"503", "Service Unavailable", "oops"}, nil},
		{"empty body", 502, "", "", []string{"502", "Bad Gateway"}, nil},
		{"whitespace body", 502, "text/plain", " \n\t ", []string{"502 Bad Gateway"}, nil},
		{"non-UTF-8 error body is not quoted", 500, "text/plain", "bad \xff bytes", []string{"500"}, []string{"bytes"}},
		{"redirect", 302, "text/html", "moved", []string{"302", "moved"}, nil},
		{"304", 304, "", "", []string{"304"}, nil},
		{"1xx", 101, "", "", []string{"101"}, nil},
		{"199", 199, "application/json", `{"content":"x"}`, []string{"199"}, nil},
		{"300", 300, "application/json", `{"content":"x"}`, []string{"300"}, nil},
		{"599", 599, "text/plain", "x", []string{"599"}, nil},
		{"action required on an error status", 403, "application/json", `{"type":"action_required","content":"x"}`, []string{"403"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := result.Normalize(tt.status, tt.ct, []byte(tt.body))
			checkError(t, got)
			for _, w := range tt.want {
				if !strings.Contains(got.Content, w) {
					t.Errorf("Content = %q, want it to contain %q", got.Content, w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(got.Content, w) {
					t.Errorf("Content = %q, want it not to contain %q", got.Content, w)
				}
			}
		})
	}
}

func TestNormalizeLongErrorBody(t *testing.T) {
	tests := []struct {
		name string
		body string
	}{
		{"ascii", strings.Repeat("x", 5000) + "TAIL"},
		{"three-byte runes cut mid-rune", strings.Repeat("€", 2000) + "TAIL"},
		{"two-byte runes", "a" + strings.Repeat("é", 3000) + "TAIL"},
		{"four-byte runes", strings.Repeat("😀", 1000) + "TAIL"},
		{"just over the bound", strings.Repeat("y", 201) + "TAIL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := result.Normalize(500, "text/plain", []byte(tt.body))
			checkError(t, got)
			quoted := strings.TrimPrefix(got.Content, "handler answered 500 Internal Server Error: ")
			if n := utf8.RuneCountInString(quoted); n != 201 {
				t.Errorf("error content quotes %d characters, want 200 and an ellipsis", n)
			}
			if strings.Contains(got.Content, "TAIL") {
				t.Errorf("error content kept the tail of a %d-byte body", len(tt.body))
			}
			if !strings.HasSuffix(got.Content, "…") {
				t.Errorf("truncated error content does not end with an ellipsis: ...%q", got.Content[len(got.Content)-10:])
			}
			if !strings.HasPrefix(got.Content, "handler answered 500 Internal Server Error: "+tt.body[:10]) {
				t.Errorf("error content does not quote the start of the body: %q", got.Content[:60])
			}
		})
	}

	long := strings.Repeat("w", 5000)
	got := result.Normalize(409, "application/json", []byte(`{"code":"`+long+`","error":"`+long+`"}`))
	if len(got.Content) > 2200 || strings.Count(got.Content, "…") != 2 {
		t.Errorf("a long domain error is not bounded: %d bytes", len(got.Content))
	}

	short := strings.Repeat("é", 200)
	if got := result.Normalize(500, "text/plain", []byte(short)); !strings.HasSuffix(got.Content, short) || strings.HasSuffix(got.Content, "…") {
		t.Errorf("a body of exactly 200 characters was truncated: %q", got.Content)
	}
}

// TestErrorText: the model reads a failing answer's message, not its
// stack trace or its page's markup; the rest is for the gateway's log.
func TestErrorText(t *testing.T) {
	for _, c := range []struct {
		name, ctype, body, want string
	}{
		{"one line", "text/plain", "database down\n", "database down"},
		{"a stack trace", "text/plain", "Error: boom\n    at handler (/srv/app.js:10:5)\n    at next (/srv/node_modules/x.js:1:1)\n", "Error: boom"},
		{"a Java trace", "", "java.lang.NullPointerException: user\n\tat com.example.Api.get(Api.java:42)\n", "java.lang.NullPointerException: user"},
		{"blank lines first", "text/plain", "\n\n  \n  bad   gateway \t now\nmore", "bad gateway now"},
		{"an nginx page", "text/html", "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>", "502 Bad Gateway 502 Bad Gateway nginx"},
		{"HTML sent as text", "text/plain", "<!DOCTYPE html><html><head><style>body{color:red}</style><script>var secret=1</script></head><body><p>Server &amp; error</p></body></html>", "Server & error"},
		{"HTML with no type", "", "  <html><body><h1>Oops</h1><pre>Traceback (most recent call last):\n  File x</pre></body></html>", "Oops Traceback (most recent call last): File x"},
		{"not UTF-8", "text/plain", "caf\xff", ""},
		{"empty", "text/plain", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := result.ErrorText(c.ctype, []byte(c.body)); got != c.want {
				t.Errorf("ErrorText = %q, want %q", got, c.want)
			}
		})
	}
	page := "<html><body><p>" + strings.Repeat("word ", 500) + "</p><script>" + strings.Repeat("x", 1<<20) + "</script></body></html>"
	if got := result.ErrorText("text/html", []byte(page)); utf8.RuneCountInString(got) != 201 || !strings.HasSuffix(got, "…") {
		t.Errorf("a long page: %d characters %q", utf8.RuneCountInString(got), got[:40])
	}
}

func TestFromJSON(t *testing.T) {
	got := result.FromJSON([]byte(`{"content":"c","markdown":"m"}`))
	want := result.Result{Content: "c", Markdown: "m", Card: result.CardMarkdown}
	if !got.Equal(want) {
		t.Errorf("FromJSON = %+v, want %+v", got, want)
	}
	if got := result.FromJSON([]byte(`{"content":7}`)); !got.IsError {
		t.Errorf("FromJSON with a number content = %+v, want an error", got)
	}
}

func TestCheckEmbedURL(t *testing.T) {
	tests := []struct {
		url string
		ok  bool
	}{
		{"https://app.example/x", true},
		{"http://localhost:8080/", true},
		{"https://[::1]:8443/p?q=1#f", true},
		{"HTTP://APP.EXAMPLE", true},
		{"https://user@app.example/", true},
		{"/x", false},
		{"x", false},
		{"", false},
		{"//app.example/x", false},
		{"javascript:alert(1)", false},
		{"JavaScript://app.example/%0aalert(1)", false},
		{"data:text/html,hi", false},
		{"file:///etc/passwd", false},
		{"ftp://app.example/", false},
		{"https://", false},
		{"https:///x", false},
		{"https:app.example", false},
		{" https://app.example", false},
		{"https://app.example/\n", false},
		{"https://a b/", false},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			err := result.CheckEmbedURL(tt.url)
			if (err == nil) != tt.ok {
				t.Errorf("CheckEmbedURL(%q) = %v, want ok=%v", tt.url, err, tt.ok)
			}
		})
	}
}

func TestErrorf(t *testing.T) {
	got := result.Failure("tool %s: %d", "t", 3)
	if !got.Equal(result.Result{IsError: true, Content: "tool t: 3"}) {
		t.Errorf("Errorf = %+v", got)
	}
}

func TestNormalizeOrCard(t *testing.T) {
	for _, c := range []struct {
		name, ct, body string
		status         int
		card           bool
	}{
		{"card", "application/json", `{"type":"action_required","title":"t","elements":[]}`, 200, true},
		{"escaped type", "application/json", `{"type":"action\u005frequired"}`, 200, true},
		{"result", "application/json", `{"content":"c","type":"note"}`, 200, false},
		{"card on an error status", "application/json", `{"type":"action_required"}`, 409, false},
		{"card as text", "text/plain", `{"type":"action_required"}`, 200, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, card := result.NormalizeOrCard(c.status, c.ct, []byte(c.body))
			if card != c.card {
				t.Errorf("card = %v, want %v (%+v)", card, c.card, r)
			}
			if card && !r.IsError {
				t.Errorf("a card where no card is allowed must be an error result: %+v", r)
			}
		})
	}
}

// A failing answer's domain error is read as it was on encoding/json:
// names in any case, the last of repeated names, invalid UTF-8 as U+FFFD.
func TestDomainErrorAsEncodingJSON(t *testing.T) {
	for _, body := range []string{
		`{"code":"nf","error":"missing"}`, `{"Code":"nf","ERROR":"missing","other":1}`, `{"code":"a","code":"b","error":"e"}`,
		`{"code":"a","Code":"b","error":"e"}`, "{\"code\":\"\xff\",\"error\":\"\\ud800\"}", `{"co_de":"a","error":"e"}`,
		`{"code":null,"error":"e"}`, `{"code":"a","error":1}`, `{"code":"a"}`, `{"code":"a","error":"e"} x`, `[]`, `null`,
	} {
		var de struct {
			Code  *string `json:"code"`
			Error *string `json:"error"`
		}
		want := "handler answered 404 Not Found: " + body
		if legacyjson.Unmarshal([]byte(body), &de) == nil && de.Code != nil && de.Error != nil {
			want = "handler answered 404 Not Found: " + *de.Code + ": " + *de.Error
		}
		if !utf8.ValidString(body) && want == "handler answered 404 Not Found: "+body {
			want = "handler answered 404 Not Found"
		}
		if got := result.Normalize(404, "application/json", []byte(body)); got.Content != want || !got.IsError {
			t.Errorf("%s: %+v, want %q", body, got, want)
		}
	}
}
