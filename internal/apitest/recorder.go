package apitest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Recorded is what the upstream saw of one request.
type Recorded struct {
	Method string
	Path   string // escaped
	Query  string
	Header http.Header
	Body   []byte
}

// Recorder is a loopback upstream that records each request, counts them,
// and answers by path, as the test tools' targets expect.
type Recorder struct {
	*httptest.Server
	mu   sync.Mutex
	last map[string]Recorded
	seen int
}

// NewRecorder starts a Recorder; it stops when the test ends.
func NewRecorder(t testing.TB) *Recorder {
	rec := &Recorder{last: map[string]Recorded{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"content":"ok","extra":"dropped"}`)
	})
	mux.HandleFunc("/api/bookmark", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":7,"title":"Go","url":"https://go.dev","tags":["lang"]}`)
	})
	mux.HandleFunc("/card/", func(w http.ResponseWriter, r *http.Request) {
		cards := map[string]string{
			"plain": `{"type":"action_required","title":"Send the email?","description":"To ada@example.com","elements":[
				{"type":"button","id":"approve","label":"Send","variant":"primary","input":{"content":"approved","markdown":"**approved**"}},
				{"type":"button","id":"reject","label":"Don't send","input":{"reason":"no","n":1}},
				{"type":"button","id":"run","label":"Run","input":{"id":"z9"},"target":{"type":"app","component":"api","method":"POST","path":"/items/${input.id}","body":"${input}"}}]}`,
			"device":    `{"type":"action_required","title":"Scan","assignee":{"computerId":"pc-7"},"elements":[{"type":"button","id":"scan","label":"Scan","input":{"content":"scanned"}}]}`,
			"dup":       `{"type":"action_required","title":"t","elements":[{"type":"button","id":"a","label":"A"},{"type":"button","id":"a","label":"B"}]}`,
			"badtarget": `{"type":"action_required","title":"t","elements":[{"type":"button","id":"a","label":"A","target":{"type":"app","component":"nowhere","method":"GET","path":"/"}}]}`,
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, cards[strings.TrimPrefix(r.URL.Path, "/card/")])
	})
	mux.HandleFunc("/slowok", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(150 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"content":"slow ok"}`)
	})
	mux.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "plain <b>text</b>")
	})
	mux.HandleFunc("/md", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"content":"saved","markdown":"**saved**"}`)
	})
	mux.HandleFunc("/both", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"content":"c","markdown":"m","embedUrl":"https://app.example/card/1"}`)
	})
	mux.HandleFunc("/relative-embed", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"content":"c","embedUrl":"/card/1"}`)
	})
	mux.HandleFunc("/no-content", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"result":42}`)
	})
	mux.HandleFunc("/domain-error", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"code":"not_found","error":"no bookmark b9"}`)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for i := 0; i < 80; i++ { // 5 MiB
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/cut", func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\nonly part")
		buf.Flush()
		conn.Close()
	})
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		key := r.URL.Path
		if strings.HasPrefix(key, "/items/") {
			key = "/items/"
		}
		if strings.HasPrefix(key, "/card/") {
			key = "/card/"
		}
		rec.last[key] = Recorded{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Clone(), body}
		rec.seen++
		rec.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(rec.Close)
	return rec
}

// Get returns the last request to path (every /items/… and /card/… path
// counts as "/items/" and "/card/"), failing the test if there was none.
func (rec *Recorder) Get(t testing.TB, path string) Recorded {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	r, ok := rec.last[path]
	if !ok {
		t.Fatalf("upstream saw no request to %s", path)
	}
	return r
}

// Count is how many requests the upstream saw.
func (rec *Recorder) Count() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.seen
}
