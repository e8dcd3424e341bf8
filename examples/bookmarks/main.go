// Command bookmarks is a small app component for the toolgate quick start.
// It keeps bookmarks in memory and answers tool calls in each of the result
// channels a handler may use: plain text, content + markdown, content +
// embedUrl, and domain errors. It uses only the standard library, so it
// shows what any HTTP server has to do to sit behind toolgate.
//
//	go run ./examples/bookmarks -addr 127.0.0.1:9001 -public http://127.0.0.1:8080/app
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"html/template"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// maxBody bounds what a request body may hold; a bookmark is small.
const maxBody = 64 << 10

func main() {
	addr := flag.String("addr", "127.0.0.1:9001", "address to listen on")
	public := flag.String("public", "http://127.0.0.1:8080/app",
		"absolute base URL where this component's pages are reachable from the browser (for embedUrl)")
	flag.Parse()

	if u, err := url.Parse(*public); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		log.Fatalf("-public %q must be an absolute http(s) URL", *public)
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{
		Handler:           logRequests(newApp(*public).routes()),
		ReadHeaderTimeout: 10 * time.Second,
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			log.Printf("shutdown: %v", err)
		}
	}()

	log.Printf("bookmarks listening on http://%s (pages at %s)", ln.Addr(), *public)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
	log.Printf("bookmarks stopped")
}

// bookmark is one saved link.
type bookmark struct {
	ID    string   `json:"id"`
	URL   string   `json:"url"`
	Title string   `json:"title"`
	Tags  []string `json:"tags,omitempty"`
	seq   int
}

// app holds the bookmarks. Nothing is persisted: a restart forgets them.
type app struct {
	public string // base URL of the pages, no trailing slash

	mu    sync.Mutex
	next  int
	items map[string]*bookmark
}

func newApp(public string) *app {
	return &app{public: strings.TrimSuffix(public, "/"), items: map[string]*bookmark{}}
}

func (a *app) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /bookmarks", a.save)
	mux.HandleFunc("GET /bookmarks", a.list)
	mux.HandleFunc("GET /bookmarks/{id}", a.show)
	mux.HandleFunc("DELETE /bookmarks/{id}", a.delete)
	mux.HandleFunc("GET /bookmarks/{id}/card", a.card)
	mux.HandleFunc("GET /whoami", whoami)
	mux.HandleFunc("GET /ping", func(w http.ResponseWriter, r *http.Request) {
		writeText(w, http.StatusOK, "pong")
	})
	return mux
}

// result is the JSON a handler answers with: content for the model, and
// optionally markdown or an embedded page for the person.
type result struct {
	Content  string `json:"content"`
	Markdown string `json:"markdown,omitempty"`
	EmbedURL string `json:"embedUrl,omitempty"`
}

// domainError is a failure the model should read and may act on; toolgate
// carries code and error into the tool result's content.
type domainError struct {
	Code  string `json:"code"`
	Error string `json:"error"`
}

type saveRequest struct {
	URL   string   `json:"url"`
	Title string   `json:"title"`
	Tags  []string `json:"tags"`
}

func (a *app) save(w http.ResponseWriter, r *http.Request) {
	var in saveRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		writeJSON(w, http.StatusBadRequest, domainError{"invalid", "the body must be a JSON object {url, title, tags?}: " + err.Error()})
		return
	}
	// toolgate has already checked the input against the tool's schema;
	// this is the component's own, lighter check for callers that skip it.
	in.Title = strings.TrimSpace(in.Title)
	switch u, err := url.Parse(in.URL); {
	case in.URL == "":
		writeJSON(w, http.StatusBadRequest, domainError{"invalid", "url is required"})
		return
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		writeJSON(w, http.StatusBadRequest, domainError{"invalid", fmt.Sprintf("url %q must be an absolute http(s) URL", in.URL)})
		return
	case in.Title == "":
		writeJSON(w, http.StatusBadRequest, domainError{"invalid", "title is required"})
		return
	}

	a.mu.Lock()
	a.next++
	b := &bookmark{ID: "b" + strconv.Itoa(a.next), URL: in.URL, Title: in.Title, Tags: in.Tags, seq: a.next}
	a.items[b.ID] = b
	a.mu.Unlock()

	writeJSON(w, http.StatusCreated, result{
		Content:  fmt.Sprintf("Saved bookmark %s: %s (%s)", b.ID, b.Title, b.URL),
		Markdown: fmt.Sprintf("Saved **[%s](%s)**", b.Title, b.URL),
	})
}

// list answers in plain text: the simplest channel, the body is the content.
func (a *app) list(w http.ResponseWriter, r *http.Request) {
	tag := r.URL.Query().Get("tag")
	a.mu.Lock()
	var found []bookmark
	for _, b := range a.items {
		if tag == "" || slices.Contains(b.Tags, tag) {
			found = append(found, *b)
		}
	}
	a.mu.Unlock()
	if len(found) == 0 {
		writeText(w, http.StatusOK, "No bookmarks.")
		return
	}
	slices.SortFunc(found, func(x, y bookmark) int { return x.seq - y.seq })
	var sb strings.Builder
	for _, b := range found {
		fmt.Fprintf(&sb, "%s %s %s\n", b.ID, b.Title, b.URL)
	}
	writeText(w, http.StatusOK, sb.String())
}

func (a *app) show(w http.ResponseWriter, r *http.Request) {
	b, ok := a.lookup(w, r)
	if !ok {
		return
	}
	content := fmt.Sprintf("%s: %s (%s)", b.ID, b.Title, b.URL)
	if len(b.Tags) > 0 {
		content += ", tags: " + strings.Join(b.Tags, ", ")
	}
	writeJSON(w, http.StatusOK, result{
		Content:  content,
		EmbedURL: a.public + "/bookmarks/" + url.PathEscape(b.ID) + "/card",
	})
}

func (a *app) delete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	a.mu.Lock()
	_, ok := a.items[id]
	delete(a.items, id)
	a.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, domainError{"not_found", "no bookmark " + id})
		return
	}
	writeJSON(w, http.StatusOK, result{Content: "Deleted " + id + "."})
}

// cardPage is the page shown in the tool card's iframe. It tells the card
// its height so the iframe fits the content.
var cardPage = template.Must(template.New("card").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
  body { margin: 0; font: 14px/1.4 system-ui, sans-serif; color: #1f2328; }
  .card { padding: 12px 14px; border-left: 4px solid #0969da; }
  .title { font-size: 16px; font-weight: 600; }
  .url { color: #57606a; word-break: break-all; }
  .tag { display: inline-block; margin: 6px 4px 0 0; padding: 1px 8px; border-radius: 10px; background: #ddf4ff; color: #0969da; font-size: 12px; }
</style>
</head>
<body>
<div class="card">
  <div class="title"><a href="{{.URL}}" target="_blank" rel="noopener noreferrer">{{.Title}}</a></div>
  <div class="url">{{.URL}}</div>
  {{range .Tags}}<span class="tag">{{.}}</span>{{end}}
</div>
<script>
  function postHeight() {
    window.parent.postMessage({__kazzle_height: document.documentElement.scrollHeight}, "*");
  }
  window.addEventListener("load", postHeight);
</script>
</body>
</html>
`))

func (a *app) card(w http.ResponseWriter, r *http.Request) {
	b, ok := a.lookup(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := cardPage.Execute(w, b); err != nil {
		log.Printf("card %s: %v", b.ID, err)
	}
}

// lookup finds the bookmark named by the {id} path value, or answers 404.
func (a *app) lookup(w http.ResponseWriter, r *http.Request) (bookmark, bool) {
	id := r.PathValue("id")
	a.mu.Lock()
	b, ok := a.items[id]
	var cp bookmark
	if ok {
		cp = *b
	}
	a.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, domainError{"not_found", "no bookmark " + id})
		return bookmark{}, false
	}
	return cp, true
}

// whoami shows what toolgate injects into every app call: the identity
// token and the call's context.
//
// The token is only DECODED here, NOT VERIFIED: anyone who can reach this
// port can send any token. A real component must verify the signature
// against toolgate's /.well-known/jwks.json (and check iss, aud and exp)
// before trusting a claim; the apptools package will do that (a later
// issue). Keep this endpoint for looking, never for deciding.
func whoami(w http.ResponseWriter, r *http.Request) {
	var lines []string
	auth := r.Header.Get("Authorization")
	token, ok := strings.CutPrefix(auth, "Bearer ")
	switch {
	case auth == "":
		lines = append(lines, "No Authorization header: this call did not come through an app target.")
	case !ok:
		lines = append(lines, "Authorization is not a Bearer token.")
	default:
		claims, err := decodeClaims(token)
		if err != nil {
			lines = append(lines, "Bearer token payload does not decode: "+err.Error())
			break
		}
		lines = append(lines,
			"Identity token (decoded, not verified):",
			"  user (sub): "+claimString(claims["sub"]),
			"  install: "+claimString(claims["install"]),
			"  iss: "+claimString(claims["iss"]),
			"  aud: "+claimString(claims["aud"]),
		)
		if exp, ok := claims["exp"].(float64); ok {
			lines = append(lines, "  exp: "+time.Unix(int64(exp), 0).UTC().Format(time.RFC3339))
		}
	}
	if tc := r.Header.Get("Kazzle-Tool-Context"); tc != "" {
		lines = append(lines, "Kazzle-Tool-Context: "+tc)
	} else {
		lines = append(lines, "No Kazzle-Tool-Context header.")
	}
	writeJSON(w, http.StatusOK, result{Content: strings.Join(lines, "\n")})
}

// decodeClaims returns a JWT's payload without checking its signature.
func decodeClaims(token string) (map[string]any, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("want 3 dot-separated parts, got %d", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, err
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		return nil, err
	}
	return claims, nil
}

func claimString(v any) string {
	switch v := v.(type) {
	case nil:
		return "(absent)"
	case string:
		return v
	case []any: // aud may be a list
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = claimString(e)
		}
		return strings.Join(parts, ", ")
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func writeText(w http.ResponseWriter, status int, s string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprint(w, s)
}

// statusRecorder remembers the status a handler wrote, for the log line.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		log.Printf("%s %s -> %d (%s)", r.Method, r.URL.RequestURI(), rec.status, time.Since(start).Round(time.Microsecond))
	})
}
