package main

import (
	_ "embed"
	"html/template"
	"net/http"
	"regexp"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/golang-jwt/jwt/v5"

	"github.com/toolgate/toolgate/apptools"
)

// The example page: a bookmark draft form whose values a client tool reads
// and whose fields follow the page as readables (page context).

//go:embed page.html
var pageHTML string

var pageTemplate = template.Must(template.New("page").Parse(pageHTML))

// pageConfig is what the page needs: where toolgate is, and the secret
// shared with toolgate's pages block to mint page tokens.
type pageConfig struct {
	toolgate string // toolgate's base URL, as the browser reaches it
	secret   []byte
	user     string // the demo user the page signs in
	install  string // and that user's installation ("" for none)
	// sessionKey signs the session cookie. It is not the page secret:
	// toolgate must never take a session for a page token.
	sessionKey []byte
}

// sessionCookie holds the signed-in user. The example's stand-in for an
// app's own login: opening the page signs in the demo user.
const (
	sessionCookie   = "bookmarks_session"
	sessionAudience = "bookmarks-session"
	sessionTTL      = 12 * time.Hour
)

var threadRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// pageTokenTTL is short: the client asks again when a token is refused.
const pageTokenTTL = 10 * time.Minute

func (a *app) pageRoutes(mux *http.ServeMux, pc pageConfig) {
	if pc.sessionKey == nil {
		pc.sessionKey = randomKey()
	}
	mux.HandleFunc("GET /page", func(w http.ResponseWriter, r *http.Request) {
		// A real app signs its user in with its own login; the example
		// has one demo user, signed in when the page is opened.
		claims := jwt.MapClaims{"aud": sessionAudience, "sub": pc.user, "exp": time.Now().Add(sessionTTL).Unix()}
		if pc.install != "" {
			claims["install"] = pc.install
		}
		session, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(pc.sessionKey)
		if err != nil {
			apptools.WriteError(w, http.StatusInternalServerError, "internal", err.Error())
			return
		}
		// No Path: the cookie is scoped to where the page is served
		// (/app/ behind toolgate's site), and SameSite keeps other sites
		// from using it.
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: session, MaxAge: int(sessionTTL.Seconds()),
			HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = pageTemplate.Execute(w, map[string]string{"Toolgate": pc.toolgate})
	})
	// A page token is for the session's user and installation, whatever
	// the request says: a token for another user would show the page that
	// user's client tool calls and let it answer them. The token names one
	// thread, and toolgate shows the page only that thread's calls of that
	// user in that installation (user ids are unique only within one).
	mux.HandleFunc("GET /page-token", func(w http.ResponseWriter, r *http.Request) {
		user, install, ok := sessionUser(r, pc.sessionKey)
		if !ok {
			apptools.WriteError(w, http.StatusUnauthorized, "unauthorized", "no signed-in session: open the page first")
			return
		}
		thread := r.URL.Query().Get("thread")
		if !threadRE.MatchString(thread) {
			apptools.WriteError(w, http.StatusBadRequest, "invalid", "thread must match "+threadRE.String())
			return
		}
		now := time.Now()
		claims := jwt.MapClaims{
			"iss": "bookmarks", "aud": "toolgate-pages", "sub": user, "thread": thread,
			"iat": now.Unix(), "exp": now.Add(pageTokenTTL).Unix(),
		}
		if install != "" {
			claims["install"] = install
		}
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(pc.secret)
		if err != nil {
			apptools.WriteError(w, http.StatusInternalServerError, "internal", err.Error())
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Type", "application/json")
		_ = json.MarshalWrite(w, map[string]string{"token": tok, "user": user, "install": install, "thread": thread})
	})
}

// sessionUser returns the user and installation of the request's session
// cookie, if it holds one this process signed and that has not expired.
func sessionUser(r *http.Request, key []byte) (user, install string, ok bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return "", "", false
	}
	var claims struct {
		jwt.RegisteredClaims
		Install string `json:"install,omitempty"`
	}
	_, err = jwt.NewParser(jwt.WithValidMethods([]string{"HS256"}), jwt.WithAudience(sessionAudience), jwt.WithExpirationRequired()).
		ParseWithClaims(c.Value, &claims, func(*jwt.Token) (any, error) { return key, nil })
	if err != nil || claims.Subject == "" {
		return "", "", false
	}
	return claims.Subject, claims.Install, true
}
