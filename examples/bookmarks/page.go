package main

import (
	_ "embed"
	"encoding/json"
	"html/template"
	"net/http"
	"regexp"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/toolgate/toolgate/apptools"
)

// The example page: a bookmark draft form whose values a client tool reads
// and whose fields follow the page as readables (SPEC §7–8).

//go:embed page.html
var pageHTML string

var pageTemplate = template.Must(template.New("page").Parse(pageHTML))

// pageConfig is what the page needs: where toolgate is, and the secret
// shared with toolgate's pages block to mint page tokens.
type pageConfig struct {
	toolgate string // toolgate's base URL, as the browser reaches it
	secret   []byte
	user     string // the demo user the page acts for
}

var threadRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// pageTokenTTL is short: the client asks again when a token is refused.
const pageTokenTTL = 10 * time.Minute

func (a *app) pageRoutes(mux *http.ServeMux, pc pageConfig) {
	mux.HandleFunc("GET /page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = pageTemplate.Execute(w, map[string]string{"Toolgate": pc.toolgate})
	})
	// A real app mints page tokens for its logged-in user; the example has
	// one demo user. The token names one thread, and toolgate shows the
	// page only that thread's calls.
	mux.HandleFunc("GET /page-token", func(w http.ResponseWriter, r *http.Request) {
		thread := r.URL.Query().Get("thread")
		if !threadRE.MatchString(thread) {
			apptools.WriteError(w, http.StatusBadRequest, "invalid", "thread must match "+threadRE.String())
			return
		}
		now := time.Now()
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
			"iss": "bookmarks", "aud": "toolgate-pages", "sub": pc.user, "thread": thread,
			"iat": now.Unix(), "exp": now.Add(pageTokenTTL).Unix(),
		}).SignedString(pc.secret)
		if err != nil {
			apptools.WriteError(w, http.StatusInternalServerError, "internal", err.Error())
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"token": tok, "user": pc.user, "thread": thread})
	})
}
