package apptools_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/apptools"
)

func TestToolContext(t *testing.T) {
	tests := []struct {
		name   string
		values []string // nil: no header
		want   apptools.Context
		errHas string // empty: no error
	}{
		{"thread", []string{`{"source":"thread","threadId":"t_1"}`}, apptools.Context{Source: "thread", ThreadID: "t_1"}, ""},
		{"thread, keys reversed", []string{`{"threadId":"t_1","source":"thread"}`}, apptools.Context{Source: "thread", ThreadID: "t_1"}, ""},
		{"api", []string{`{"source":"api"}`}, apptools.Context{Source: "api"}, ""},
		{"api with spaces", []string{` { "source" : "api" } `}, apptools.Context{Source: "api"}, ""},
		{"escaped thread id", []string{`{"source":"thread","threadId":"t\u003c1"}`}, apptools.Context{Source: "thread", ThreadID: "t<1"}, ""},

		{"absent", nil, apptools.Context{}, "no Kazzle-Tool-Context header"},
		{"empty", []string{""}, apptools.Context{}, "not a JSON object"},
		{"not JSON", []string{"thread"}, apptools.Context{}, "not a JSON object"},
		{"array", []string{`[{"source":"api"}]`}, apptools.Context{}, "not a JSON object"},
		{"string", []string{`"api"`}, apptools.Context{}, "not a JSON object"},
		{"null", []string{`null`}, apptools.Context{}, "not a JSON object"},
		{"unterminated", []string{`{"source":"api"`}, apptools.Context{}, "EOF"},
		{"trailing comma", []string{`{"source":"api",}`}, apptools.Context{}, "invalid character"},
		{"missing colon", []string{`{"source" "api"}`}, apptools.Context{}, "invalid character"},
		{"trailing data", []string{`{"source":"api"} x`}, apptools.Context{}, "data after the object"},
		{"second object", []string{`{"source":"api"}{}`}, apptools.Context{}, "data after the object"},
		{"trailing brace", []string{`{"source":"api"}}`}, apptools.Context{}, "data after the object"},
		{"unknown field", []string{`{"source":"api","user":"u_1"}`}, apptools.Context{}, `unknown field "user"`},
		{"unknown object field", []string{`{"source":"api","x":{"y":1}}`}, apptools.Context{}, `unknown field "x"`},
		{"key in another case", []string{`{"Source":"api"}`}, apptools.Context{}, `unknown field "Source"`},
		{"duplicate source", []string{`{"source":"thread","source":"api"}`}, apptools.Context{}, `"source" is given twice`},
		{"source missing", []string{`{}`}, apptools.Context{}, "source is missing"},
		{"source only thread id", []string{`{"threadId":"t_1"}`}, apptools.Context{}, "source is missing"},
		{"source empty", []string{`{"source":""}`}, apptools.Context{}, `source "" is neither`},
		{"source unknown", []string{`{"source":"chat"}`}, apptools.Context{}, `source "chat" is neither "thread" nor "api"`},
		{"source in another case", []string{`{"source":"API"}`}, apptools.Context{}, `source "API" is neither`},
		{"source null", []string{`{"source":null}`}, apptools.Context{}, "source must be a string"},
		{"source number", []string{`{"source":1}`}, apptools.Context{}, "source must be a string"},
		{"source object", []string{`{"source":{"a":"api"}}`}, apptools.Context{}, "source must be a string"},
		{"thread without threadId", []string{`{"source":"thread"}`}, apptools.Context{}, `a "thread" context needs a threadId`},
		{"thread with empty threadId", []string{`{"source":"thread","threadId":""}`}, apptools.Context{}, `a "thread" context needs a threadId`},
		{"thread with null threadId", []string{`{"source":"thread","threadId":null}`}, apptools.Context{}, "threadId must be a string"},
		{"thread with numeric threadId", []string{`{"source":"thread","threadId":7}`}, apptools.Context{}, "threadId must be a string"},
		{"api with threadId", []string{`{"source":"api","threadId":"t_1"}`}, apptools.Context{}, `an "api" context has no threadId`},
		{"api with empty threadId", []string{`{"source":"api","threadId":""}`}, apptools.Context{}, `an "api" context has no threadId`},
		{"sent twice", []string{`{"source":"api"}`, `{"source":"api"}`}, apptools.Context{}, "sent 2 times"},

		{"approved", []string{`{"source":"thread","threadId":"t_1","approval":{"by":"u_1","device":"laptop","at":"2026-12-02T10:14:03.5Z","changed":true}}`},
			apptools.Context{Source: "thread", ThreadID: "t_1", Approval: &apptools.Approval{By: "u_1", Device: "laptop", At: time.Date(2026, 12, 2, 10, 14, 3, 5e8, time.UTC), Changed: true}}, ""},
		{"approved, no device", []string{`{"approval":{"changed":false,"at":"2026-12-02T10:14:03Z","by":"u_1"},"source":"thread","threadId":"t_1"}`},
			apptools.Context{Source: "thread", ThreadID: "t_1", Approval: &apptools.Approval{By: "u_1", At: time.Date(2026, 12, 2, 10, 14, 3, 0, time.UTC)}}, ""},
		{"approval on an api call", []string{`{"source":"api","approval":{"by":"u_1","at":"2026-12-02T10:14:03Z","changed":false}}`}, apptools.Context{}, `an "api" context has no approval`},
		{"approval null", []string{`{"source":"thread","threadId":"t","approval":null}`}, apptools.Context{}, "approval: not a JSON object"},
		{"approval array", []string{`{"source":"thread","threadId":"t","approval":[]}`}, apptools.Context{}, "approval: not a JSON object"},
		{"approval twice", []string{`{"source":"thread","threadId":"t","approval":{"by":"u","at":"2026-12-02T10:14:03Z","changed":false},"approval":{"by":"u","at":"2026-12-02T10:14:03Z","changed":false}}`}, apptools.Context{}, `"approval" is given twice`},
		{"approval unknown field", []string{`{"source":"thread","threadId":"t","approval":{"by":"u","at":"2026-12-02T10:14:03Z","changed":false,"role":"admin"}}`}, apptools.Context{}, `approval: unknown field "role"`},
		{"approval by empty", []string{`{"source":"thread","threadId":"t","approval":{"by":"","at":"2026-12-02T10:14:03Z","changed":false}}`}, apptools.Context{}, "approval: by is empty"},
		{"approval by missing", []string{`{"source":"thread","threadId":"t","approval":{"at":"2026-12-02T10:14:03Z","changed":false}}`}, apptools.Context{}, "approval: by is missing"},
		{"approval at not a time", []string{`{"source":"thread","threadId":"t","approval":{"by":"u","at":"yesterday","changed":false}}`}, apptools.Context{}, "approval: at is not an RFC 3339 time"},
		{"approval changed a string", []string{`{"source":"thread","threadId":"t","approval":{"by":"u","at":"2026-12-02T10:14:03Z","changed":"yes"}}`}, apptools.Context{}, "approval: changed must be a boolean"},
		{"approval by a number", []string{`{"source":"thread","threadId":"t","approval":{"by":1,"at":"2026-12-02T10:14:03Z","changed":false}}`}, apptools.Context{}, "approval: by must be a string"},
		{"approval by twice", []string{`{"source":"thread","threadId":"t","approval":{"by":"u","by":"v","at":"2026-12-02T10:14:03Z","changed":false}}`}, apptools.Context{}, `approval: "by" is given twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			for _, v := range tt.values {
				r.Header.Add("Kazzle-Tool-Context", v)
			}
			got, err := apptools.ToolContext(r)
			if tt.errHas == "" {
				if err != nil || !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
				}
				if apptools.IsThread(r) != (tt.want.Source == "thread") || got.IsThread() != apptools.IsThread(r) {
					t.Errorf("IsThread disagrees with %+v", got)
				}
				return
			}
			if err == nil {
				t.Fatalf("got %+v, want an error holding %q", got, tt.errHas)
			}
			if !strings.Contains(err.Error(), tt.errHas) {
				t.Errorf("error %q does not hold %q", err, tt.errHas)
			}
			if got != (apptools.Context{}) {
				t.Errorf("context %+v beside an error", got)
			}
			if tt.values == nil {
				if !errors.Is(err, apptools.ErrNoContext) || errors.Is(err, apptools.ErrBadContext) {
					t.Errorf("absent header: %v is not ErrNoContext alone", err)
				}
			} else if !errors.Is(err, apptools.ErrBadContext) || !strings.HasPrefix(err.Error(), "malformed Kazzle-Tool-Context header: ") {
				t.Errorf("%v does not wrap ErrBadContext", err)
			}
			if apptools.IsThread(r) {
				t.Errorf("IsThread true for a bad header")
			}
		})
	}
}

func TestWriters(t *testing.T) {
	tests := []struct {
		name        string
		write       func(w http.ResponseWriter) error
		status      int
		contentType string
		body        string
	}{
		{
			"result, content only",
			func(w http.ResponseWriter) error {
				return apptools.WriteResult(w, http.StatusOK, apptools.Result{Content: "Deleted b1."})
			},
			200, "application/json", `{"content":"Deleted b1."}` + "\n",
		},
		{
			"result, empty content is still sent",
			func(w http.ResponseWriter) error { return apptools.WriteResult(w, http.StatusOK, apptools.Result{}) },
			200, "application/json", `{"content":""}` + "\n",
		},
		{
			"result, every channel, HTML characters kept",
			func(w http.ResponseWriter) error {
				return apptools.WriteResult(w, http.StatusCreated, apptools.Result{
					Content:  "Saved <b1> & \"Go\"",
					Markdown: "Saved **[Go](https://go.dev/?a=1&b=2)**",
					EmbedURL: "https://app.test/bookmarks/b1/card",
				})
			},
			201, "application/json",
			`{"content":"Saved <b1> & \"Go\"","markdown":"Saved **[Go](https://go.dev/?a=1&b=2)**","embedUrl":"https://app.test/bookmarks/b1/card"}` + "\n",
		},
		{
			"text",
			func(w http.ResponseWriter) error {
				return apptools.WriteText(w, http.StatusOK, "b1 Go https://go.dev\n")
			},
			200, "text/plain; charset=utf-8", "b1 Go https://go.dev\n",
		},
		{
			"text, empty",
			func(w http.ResponseWriter) error { return apptools.WriteText(w, http.StatusAccepted, "") },
			202, "text/plain; charset=utf-8", "",
		},
		{
			"error",
			func(w http.ResponseWriter) error {
				return apptools.WriteError(w, http.StatusNotFound, "not_found", "no bookmark <b9>")
			},
			404, "application/json", `{"code":"not_found","error":"no bookmark <b9>"}` + "\n",
		},
		{
			"error, empty fields are still sent",
			func(w http.ResponseWriter) error {
				return apptools.WriteError(w, http.StatusInternalServerError, "", "")
			},
			500, "application/json", `{"code":"","error":""}` + "\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			if err := tt.write(rec); err != nil {
				t.Fatal(err)
			}
			if rec.Code != tt.status || rec.Header().Get("Content-Type") != tt.contentType || rec.Body.String() != tt.body {
				t.Errorf("got %d %q %q\nwant %d %q %q", rec.Code, rec.Header().Get("Content-Type"), rec.Body.String(),
					tt.status, tt.contentType, tt.body)
			}
		})
	}
}

// failingWriter refuses the body, as a connection the caller closed does.
type failingWriter struct{ httptest.ResponseRecorder }

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("connection closed") }

func (failingWriter) WriteString(string) (int, error) { return 0, errors.New("connection closed") }

func TestWritersReportWriteErrors(t *testing.T) {
	for name, write := range map[string]func(w http.ResponseWriter) error{
		"result": func(w http.ResponseWriter) error { return apptools.WriteResult(w, 200, apptools.Result{Content: "x"}) },
		"text":   func(w http.ResponseWriter) error { return apptools.WriteText(w, 200, "x") },
		"error":  func(w http.ResponseWriter) error { return apptools.WriteError(w, 400, "invalid", "x") },
	} {
		w := &failingWriter{*httptest.NewRecorder()}
		if err := write(w); err == nil || err.Error() != "connection closed" {
			t.Errorf("%s: error %v, want the write's", name, err)
		}
	}
}
