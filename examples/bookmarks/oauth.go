package main

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/apptools"
)

// The demo sign-in service: an OAuth 2.0 provider under /oauth/ for one
// client, so that the quick start shows a connection (docs/connections.md)
// with no outside account. It has one account, "demo user", signed in
// already; its consent page asks once per flow.
//
// The client's credentials are public: Caddyfile.example writes them, and
// the account they open holds nothing. A real service registers each
// client's secret and redirect URIs, and signs its users in.
const (
	demoClientID     = "toolgate-demo"
	demoClientSecret = "demo-secret"
	demoSubject      = "demo user"
	demoScope        = "profile"
	demoCodeTTL      = time.Minute
	demoAccessTTL    = time.Hour
)

// demoOAuth is the provider. Codes and tokens live in memory: a restart
// forgets them, and the gateway's users connect again. Expired codes and
// access tokens are swept as new ones are made; refresh tokens last as long
// as the process, as the bookmarks do.
type demoOAuth struct {
	redirectURI string // the client's one registered callback, matched exactly
	now         func() time.Time

	mu      sync.Mutex
	codes   map[string]demoCode
	access  map[string]time.Time // access token -> when it was issued
	refresh map[string]bool      // refresh tokens not yet used
}

// demoCode is what an authorization code was issued for.
type demoCode struct {
	redirectURI, challenge string
	expires                time.Time
}

func newDemoOAuth(redirectURI string) *demoOAuth {
	return &demoOAuth{redirectURI: redirectURI, now: time.Now,
		codes: map[string]demoCode{}, access: map[string]time.Time{}, refresh: map[string]bool{}}
}

func (o *demoOAuth) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /oauth/authorize", o.authorize)
	// A page of another origin must not press Allow for the user: the
	// browser says where a form came from (Sec-Fetch-Site, Origin).
	mux.Handle("POST /oauth/authorize", http.NewCrossOriginProtection().Handler(http.HandlerFunc(o.authorize)))
	mux.HandleFunc("POST /oauth/token", o.token)
	mux.HandleFunc("GET /oauth/me", o.me)
}

// authorize shows the consent page (GET) and takes its answer (POST),
// checking the flow's parameters each time. A wrong client or redirect_uri
// is refused here, never redirected, since the redirect could lead anywhere.
func (o *demoOAuth) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
		if err := r.ParseForm(); err != nil {
			http.Error(w, "the form could not be read", http.StatusBadRequest)
			return
		}
		q = r.PostForm
	}
	if q.Get("client_id") != demoClientID || q.Get("redirect_uri") != o.redirectURI {
		http.Error(w, "unknown client_id, or a redirect_uri not registered for it", http.StatusBadRequest)
		return
	}
	state := q.Get("state")
	switch {
	case q.Get("response_type") != "code":
		o.back(w, r, url.Values{"error": {"unsupported_response_type"}, "state": {state}})
	case state == "" || q.Get("code_challenge_method") != "S256" || !isChallenge(q.Get("code_challenge")):
		o.back(w, r, url.Values{"error": {"invalid_request"}, "error_description": {"state and an S256 code_challenge are required"}, "state": {state}})
	case q.Get("scope") != "" && q.Get("scope") != demoScope:
		o.back(w, r, url.Values{"error": {"invalid_scope"}, "state": {state}})
	case r.Method == http.MethodGet:
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		var fields []demoField
		for _, k := range []string{"response_type", "client_id", "redirect_uri", "state", "code_challenge", "code_challenge_method", "scope"} {
			fields = append(fields, demoField{k, q.Get(k)})
		}
		_ = consentPage.Execute(w, map[string]any{"Subject": demoSubject, "RedirectURI": o.redirectURI, "Fields": fields})
	case q.Get("decision") != "allow":
		o.back(w, r, url.Values{"error": {"access_denied"}, "state": {state}})
	default:
		code := rand.Text()
		o.mu.Lock()
		now := o.now()
		for c, v := range o.codes {
			if !now.Before(v.expires) {
				delete(o.codes, c)
			}
		}
		o.codes[code] = demoCode{redirectURI: o.redirectURI, challenge: q.Get("code_challenge"), expires: now.Add(demoCodeTTL)}
		o.mu.Unlock()
		o.back(w, r, url.Values{"code": {code}, "state": {state}})
	}
}

type demoField struct{ Name, Value string }

var consentPage = template.Must(template.New("consent").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>Demo sign-in</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem}button{font:inherit;margin-right:.5rem}</style>
</head><body><h1>Allow toolgate to read your demo account?</h1>
<p>Signed in as {{.Subject}}. Either answer takes you back to {{.RedirectURI}}.</p>
<form method="post" action="authorize">{{range .Fields}}
<input type="hidden" name="{{.Name}}" value="{{.Value}}">{{end}}
<button name="decision" value="allow">Allow</button><button name="decision" value="deny">Deny</button>
</form></body></html>
`))

// back redirects the browser to the registered callback with params.
func (o *demoOAuth) back(w http.ResponseWriter, r *http.Request, params url.Values) {
	u, _ := url.Parse(o.redirectURI) // checked in main
	q := u.Query()
	for k, v := range params {
		q[k] = v
	}
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

// isChallenge says whether s is what S256 makes of a verifier: the
// unpadded base64url of 32 bytes.
func isChallenge(s string) bool {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	return err == nil && len(b) == sha256.Size
}

var verifierRE = regexp.MustCompile(`^[A-Za-z0-9._~-]{43,128}$`)

// token is the token endpoint: a code with its PKCE verifier, or a refresh
// token, for a new access token and a new refresh token (the old one is
// spent). The client authenticates with HTTP Basic.
func (o *demoOAuth) token(w http.ResponseWriter, r *http.Request) {
	id, secret, ok := r.BasicAuth()
	id, _ = url.QueryUnescape(id) // RFC 6749 form-encodes both before Basic
	secret, _ = url.QueryUnescape(secret)
	if !ok || id != demoClientID || subtle.ConstantTimeCompare([]byte(secret), []byte(demoClientSecret)) != 1 {
		w.Header().Set("WWW-Authenticate", `Basic realm="demo"`)
		tokenError(w, http.StatusUnauthorized, "invalid_client")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		tokenError(w, http.StatusBadRequest, "invalid_request")
		return
	}
	f := r.PostForm
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	switch f.Get("grant_type") {
	case "authorization_code":
		c, ok := o.codes[f.Get("code")]
		delete(o.codes, f.Get("code")) // spent by its first use, right or wrong
		sum := sha256.Sum256([]byte(f.Get("code_verifier")))
		if !ok || !now.Before(c.expires) || f.Get("redirect_uri") != c.redirectURI ||
			!verifierRE.MatchString(f.Get("code_verifier")) || base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge {
			tokenError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
	case "refresh_token":
		if !o.refresh[f.Get("refresh_token")] {
			tokenError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
		delete(o.refresh, f.Get("refresh_token"))
	default:
		tokenError(w, http.StatusBadRequest, "unsupported_grant_type")
		return
	}
	for t, issued := range o.access {
		if !now.Before(issued.Add(demoAccessTTL)) {
			delete(o.access, t)
		}
	}
	access, refresh := "demo_at_"+rand.Text(), "demo_rt_"+rand.Text()
	o.access[access], o.refresh[refresh] = now, true
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{"access_token": access, "token_type": "Bearer",
		"expires_in": int(demoAccessTTL.Seconds()), "refresh_token": refresh, "scope": demoScope})
}

func tokenError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, status, map[string]string{"error": code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.MarshalWrite(w, v)
}

// me is the account's one resource, for a valid access token.
func (o *demoOAuth) me(w http.ResponseWriter, r *http.Request) {
	token, bearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	o.mu.Lock()
	issued, ok := o.access[token]
	ok = ok && bearer && o.now().Before(issued.Add(demoAccessTTL))
	o.mu.Unlock()
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="demo", error="invalid_token"`)
		apptools.WriteError(w, http.StatusUnauthorized, "invalid_token", "no valid access token of the demo sign-in service")
		return
	}
	apptools.WriteResult(w, http.StatusOK, apptools.Result{
		Content: "Your demo account: " + demoSubject + "; token issued " + issued.UTC().Format(time.RFC3339)})
}
