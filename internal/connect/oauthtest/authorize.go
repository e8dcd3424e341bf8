package oauthtest

import (
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// authorize is the authorization page, where the user consents at once.
// A request whose client or redirect_uri is wrong gets a 400 and is not
// redirected, since the redirect could lead anywhere; any other mistake
// is answered at the redirect_uri with an OAuth error (RFC 6749 §4.1.2.1).
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.record("authorize", r, q)
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "the authorization page answers GET", http.StatusMethodNotAllowed)
		return
	}
	if name, ok := repeated(q); ok {
		http.Error(w, "parameter "+name+" given more than once", http.StatusBadRequest)
		return
	}
	clientID := q.Get("client_id")
	if clientID == "" || (s.opts.ClientID != "" && clientID != s.opts.ClientID) {
		http.Error(w, "unknown client_id "+clientID, http.StatusBadRequest)
		return
	}
	redirect, msg := redirectURI(q.Get("redirect_uri"))
	if redirect == nil {
		http.Error(w, msg, http.StatusBadRequest)
		return
	}

	state := q.Get("state")
	fail := func(code, description string) {
		params := url.Values{"error": {code}, "error_description": {description}}
		if state != "" {
			params.Set("state", state)
		}
		redirectWith(w, redirect, params)
	}
	switch {
	case q.Get("response_type") != "code":
		fail("unsupported_response_type", "response_type must be code")
		return
	case state == "":
		fail("invalid_request", "state is missing")
		return
	case q.Get("code_challenge_method") != "S256":
		fail("invalid_request", "code_challenge_method must be S256")
		return
	case !isS256Challenge(q.Get("code_challenge")):
		fail("invalid_request", "code_challenge must be the base64url SHA-256 of a verifier")
		return
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deny {
		fail("access_denied", "the user refused")
		return
	}
	subject := q.Get("login_hint")
	if subject == "" {
		subject = s.subject
	}
	c := rand.Text()
	s.codes[c] = &code{
		clientID:    clientID,
		redirectURI: q.Get("redirect_uri"),
		challenge:   q.Get("code_challenge"),
		scope:       q.Get("scope"),
		subject:     subject,
		expires:     s.opts.Clock().Add(codeLifetime),
	}
	redirectWith(w, redirect, url.Values{"code": {c}, "state": {state}})
}

// redirectURI parses a redirect_uri, which must be an absolute http(s)
// URL without credentials or fragment (RFC 6749 §3.1.2); nil and why when
// it is not.
func redirectURI(raw string) (*url.URL, string) {
	if raw == "" {
		return nil, "redirect_uri is missing"
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, "redirect_uri is not a URL"
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		return nil, "redirect_uri is not an absolute http(s) URL"
	case u.User != nil:
		return nil, "redirect_uri has credentials"
	case strings.Contains(raw, "#"):
		return nil, "redirect_uri has a fragment"
	}
	return u, ""
}

// redirectWith answers 302 to the redirect URI with the parameters added
// to its own query, which is kept (RFC 6749 §3.1.2).
func redirectWith(w http.ResponseWriter, redirect *url.URL, params url.Values) {
	u := *redirect
	q := u.Query()
	for k, v := range params {
		q[k] = v
	}
	u.RawQuery = q.Encode()
	w.Header().Set("Location", u.String())
	w.WriteHeader(http.StatusFound)
}

// isS256Challenge says whether s is what S256 makes of a verifier: the
// unpadded base64url of 32 bytes.
func isS256Challenge(s string) bool {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	return err == nil && len(b) == 32
}

// repeated names a parameter given more than once, which no OAuth
// endpoint accepts (RFC 6749 §3.1, §3.2).
func repeated(v url.Values) (string, bool) {
	for k, vs := range v {
		if len(vs) > 1 {
			return k, true
		}
	}
	return "", false
}

// Authorize opens the authorization URL as the user's browser would,
// without following the redirect, and returns where it redirects: the
// client's callback with code and state, or with error and state. The
// URL must be this server's authorization page, and the answer a
// redirect; anything else fails the test.
func (s *Server) Authorize(t testing.TB, authURL string) (callback *url.URL) {
	t.Helper()
	u, err := url.Parse(authURL)
	if err != nil {
		t.Fatalf("oauthtest: authorization URL %q: %v", authURL, err)
	}
	if u.Scheme+"://"+u.Host+u.Path != s.AuthorizeURL() {
		t.Fatalf("oauthtest: %q is not this server's authorization page %s", authURL, s.AuthorizeURL())
	}
	client := &http.Client{
		Transport:     s.srv.Client().Transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, authURL, nil)
	if err != nil {
		t.Fatalf("oauthtest: %v", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("oauthtest: GET %s: %v", authURL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("oauthtest: GET %s: %s %s", authURL, resp.Status, body)
	}
	callback, err = url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatalf("oauthtest: redirect %q: %v", resp.Header.Get("Location"), err)
	}
	return callback
}
