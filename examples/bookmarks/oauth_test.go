package main

import (
	"errors"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"golang.org/x/oauth2"
)

const demoCallback = "http://127.0.0.1:8080/toolgate/connections/demo/callback"

// demoRig is the demo sign-in service on a test server, with a clock the
// test moves, and the gateway's OAuth client of it.
type demoRig struct {
	srv  *httptest.Server
	conf *oauth2.Config

	mu  sync.Mutex
	now time.Time
}

func newDemoRig(t *testing.T) *demoRig {
	t.Helper()
	r := &demoRig{now: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	o := newDemoOAuth(demoCallback)
	o.now = func() time.Time {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.now
	}
	mux := http.NewServeMux()
	o.routes(mux)
	r.srv = httptest.NewServer(mux)
	t.Cleanup(r.srv.Close)
	r.conf = &oauth2.Config{
		ClientID: demoClientID, ClientSecret: demoClientSecret, RedirectURL: demoCallback, Scopes: []string{"profile"},
		Endpoint: oauth2.Endpoint{AuthURL: r.srv.URL + "/oauth/authorize", TokenURL: r.srv.URL + "/oauth/token", AuthStyle: oauth2.AuthStyleInHeader},
	}
	return r
}

func (r *demoRig) advance(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.now = r.now.Add(d)
}

// noRedirects is a client that shows a redirect rather than following it.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

var hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]*)" value="([^"]*)">`)

// consent does what a browser does with the authorization URL: opens the
// consent page, then presses the button named decision (allow or deny),
// sending the page's form. It returns where the answer redirects to.
func (r *demoRig) consent(t *testing.T, authURL, decision string) *url.URL {
	t.Helper()
	resp, err := http.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "Allow toolgate to read your demo account?") {
		t.Fatalf("consent page: %d %s", resp.StatusCode, page)
	}
	form := url.Values{"decision": {decision}}
	for _, m := range hiddenRE.FindAllStringSubmatch(string(page), -1) {
		form.Set(html.UnescapeString(m[1]), html.UnescapeString(m[2]))
	}
	resp, err = noRedirects.PostForm(r.srv.URL+"/oauth/authorize", form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || err != nil {
		t.Fatalf("%s: %d to %q, want a redirect", decision, resp.StatusCode, resp.Header.Get("Location"))
	}
	if got := loc.Scheme + "://" + loc.Host + loc.Path; got != demoCallback {
		t.Fatalf("redirected to %s, want %s", loc, demoCallback)
	}
	return loc
}

// code runs the authorization with PKCE and Allow, and returns the code
// and its verifier.
func (r *demoRig) code(t *testing.T) (code, verifier string) {
	t.Helper()
	verifier = oauth2.GenerateVerifier()
	cb := r.consent(t, r.conf.AuthCodeURL("st-1", oauth2.S256ChallengeOption(verifier)), "allow")
	if cb.Query().Get("state") != "st-1" || cb.Query().Get("code") == "" {
		t.Fatalf("callback %s: want the state and a code", cb)
	}
	return cb.Query().Get("code"), verifier
}

// me calls /oauth/me with the Authorization header given.
func (r *demoRig) me(t *testing.T, authorization string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, r.srv.URL+"/oauth/me", nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Content string `json:"content"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatalf("/oauth/me: %s", raw)
		}
	}
	return resp.StatusCode, body.Content
}

func wantOAuthError(t *testing.T, err error, code string) {
	t.Helper()
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.ErrorCode != code {
		t.Fatalf("err = %v, want the OAuth error %s", err, code)
	}
}

func TestDemoOAuthFlow(t *testing.T) {
	r := newDemoRig(t)
	code, verifier := r.code(t)
	tok, err := r.conf.Exchange(t.Context(), code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	if tok.TokenType != "Bearer" || tok.RefreshToken == "" || tok.ExpiresIn != 3600 || tok.Extra("scope") != "profile" {
		t.Errorf("token %+v, scope %v", tok, tok.Extra("scope"))
	}
	status, content := r.me(t, "Bearer "+tok.AccessToken)
	if want := "Your demo account: demo user; token issued 2026-12-02T10:00:00Z"; status != http.StatusOK || content != want {
		t.Errorf("/oauth/me: %d %q, want %q", status, content, want)
	}
	for _, h := range []string{"", "Bearer ", "Bearer " + tok.RefreshToken, "Basic " + tok.AccessToken, "bearer" + tok.AccessToken} {
		if status, _ := r.me(t, h); status != http.StatusUnauthorized {
			t.Errorf("/oauth/me with Authorization %q: %d, want 401", h, status)
		}
	}
	r.advance(time.Hour)
	if status, _ := r.me(t, "Bearer "+tok.AccessToken); status != http.StatusUnauthorized {
		t.Errorf("/oauth/me after the token's hour: %d, want 401", status)
	}
}

func TestDemoOAuthCodeRefusals(t *testing.T) {
	r := newDemoRig(t)

	// A wrong verifier spends the code: the right one cannot follow a guess.
	code, verifier := r.code(t)
	_, err := r.conf.Exchange(t.Context(), code, oauth2.VerifierOption(oauth2.GenerateVerifier()))
	wantOAuthError(t, err, "invalid_grant")
	_, err = r.conf.Exchange(t.Context(), code, oauth2.VerifierOption(verifier))
	wantOAuthError(t, err, "invalid_grant")

	// No verifier at all.
	code, _ = r.code(t)
	_, err = r.conf.Exchange(t.Context(), code)
	wantOAuthError(t, err, "invalid_grant")

	// A code works once.
	code, verifier = r.code(t)
	if _, err := r.conf.Exchange(t.Context(), code, oauth2.VerifierOption(verifier)); err != nil {
		t.Fatal(err)
	}
	_, err = r.conf.Exchange(t.Context(), code, oauth2.VerifierOption(verifier))
	wantOAuthError(t, err, "invalid_grant")

	// A code is bound to its redirect_uri.
	code, verifier = r.code(t)
	other := *r.conf
	other.RedirectURL = "http://127.0.0.1:8080/elsewhere"
	_, err = other.Exchange(t.Context(), code, oauth2.VerifierOption(verifier))
	wantOAuthError(t, err, "invalid_grant")

	// A code lives a minute.
	code, verifier = r.code(t)
	r.advance(time.Minute)
	_, err = r.conf.Exchange(t.Context(), code, oauth2.VerifierOption(verifier))
	wantOAuthError(t, err, "invalid_grant")

	// A wrong secret, or none, is refused before the code is looked at:
	// the code still works with the right one.
	code, verifier = r.code(t)
	for _, secret := range []string{"wrong", ""} {
		bad := *r.conf
		bad.ClientSecret = secret
		_, err = bad.Exchange(t.Context(), code, oauth2.VerifierOption(verifier))
		wantOAuthError(t, err, "invalid_client")
	}
	if _, err := r.conf.Exchange(t.Context(), code, oauth2.VerifierOption(verifier)); err != nil {
		t.Errorf("the right secret after wrong ones: %v", err)
	}
	// Credentials in the form instead of HTTP Basic are not the client's.
	inForm := *r.conf
	inForm.Endpoint.AuthStyle = oauth2.AuthStyleInParams
	code, verifier = r.code(t)
	_, err = inForm.Exchange(t.Context(), code, oauth2.VerifierOption(verifier))
	wantOAuthError(t, err, "invalid_client")
}

func TestDemoOAuthDeny(t *testing.T) {
	r := newDemoRig(t)
	cb := r.consent(t, r.conf.AuthCodeURL("st-deny", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())), "deny")
	if q := cb.Query(); q.Get("error") != "access_denied" || q.Get("state") != "st-deny" || q.Has("code") {
		t.Errorf("deny redirected to %s, want error=access_denied with the state and no code", cb)
	}
}

func TestDemoOAuthRefreshRotates(t *testing.T) {
	r := newDemoRig(t)
	code, verifier := r.code(t)
	first, err := r.conf.Exchange(t.Context(), code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	r.advance(30 * time.Minute)
	second, err := r.conf.TokenSource(t.Context(), &oauth2.Token{RefreshToken: first.RefreshToken}).Token()
	if err != nil {
		t.Fatal(err)
	}
	if second.AccessToken == first.AccessToken || second.RefreshToken == "" || second.RefreshToken == first.RefreshToken {
		t.Fatalf("refresh gave %+v after %+v", second, first)
	}
	if status, content := r.me(t, "Bearer "+second.AccessToken); status != http.StatusOK || !strings.HasSuffix(content, "token issued 2026-12-02T10:30:00Z") {
		t.Errorf("/oauth/me with the refreshed token: %d %q", status, content)
	}
	_, err = r.conf.TokenSource(t.Context(), &oauth2.Token{RefreshToken: first.RefreshToken}).Token()
	wantOAuthError(t, err, "invalid_grant")
	if _, err := r.conf.TokenSource(t.Context(), &oauth2.Token{RefreshToken: second.RefreshToken}).Token(); err != nil {
		t.Errorf("the rotated refresh token: %v", err)
	}
	bad := *r.conf
	bad.ClientSecret = "wrong"
	_, err = bad.TokenSource(t.Context(), &oauth2.Token{RefreshToken: "anything"}).Token()
	wantOAuthError(t, err, "invalid_client")
}

// TestDemoOAuthAuthorizeRefusals checks what the authorization page
// refuses: a client or redirect_uri it does not know with a 400 and no
// redirect, any other mistake at the callback with an OAuth error.
func TestDemoOAuthAuthorizeRefusals(t *testing.T) {
	r := newDemoRig(t)
	good := url.Values{"response_type": {"code"}, "client_id": {demoClientID}, "redirect_uri": {demoCallback}, "state": {"s"},
		"code_challenge": {oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())}, "code_challenge_method": {"S256"}, "scope": {"profile"}}
	tests := []struct {
		name, key, value string
		wantError        string // "" for a 400 without a redirect
	}{
		{"another client", "client_id", "evil", ""},
		{"no client", "client_id", "", ""},
		{"another redirect_uri", "redirect_uri", "https://evil.example/cb", ""},
		{"a redirect_uri with more", "redirect_uri", demoCallback + "?x=1", ""},
		{"token flow", "response_type", "token", "unsupported_response_type"},
		{"no state", "state", "", "invalid_request"},
		{"plain challenge", "code_challenge_method", "plain", "invalid_request"},
		{"no challenge", "code_challenge", "", "invalid_request"},
		{"a challenge of the wrong size", "code_challenge", "abc", "invalid_request"},
		{"another scope", "scope", "admin", "invalid_scope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := url.Values{}
			for k, v := range good {
				q[k] = v
			}
			q.Set(tt.key, tt.value)
			for _, method := range []string{http.MethodGet, http.MethodPost} {
				var resp *http.Response
				var err error
				if method == http.MethodGet {
					resp, err = noRedirects.Get(r.srv.URL + "/oauth/authorize?" + q.Encode())
				} else {
					q.Set("decision", "allow")
					resp, err = noRedirects.PostForm(r.srv.URL+"/oauth/authorize", q)
				}
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				loc, _ := url.Parse(resp.Header.Get("Location"))
				if tt.wantError == "" {
					if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
						t.Errorf("%s: %d to %q, want 400 and no redirect", method, resp.StatusCode, resp.Header.Get("Location"))
					}
					continue
				}
				if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc.String(), demoCallback+"?") ||
					loc.Query().Get("error") != tt.wantError || loc.Query().Has("code") {
					t.Errorf("%s: %d to %q, want %s at the callback", method, resp.StatusCode, loc, tt.wantError)
				}
			}
		})
	}
	// The answer must be in the form's body: parameters in the URL of a
	// POST are not the form the page sent.
	resp, err := noRedirects.Post(r.srv.URL+"/oauth/authorize?"+good.Encode()+"&decision=allow", "application/x-www-form-urlencoded", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a POST with the parameters in its URL: %d, want 400", resp.StatusCode)
	}
}

// TestDemoOAuthConsentPage checks the page cannot be framed, escapes what
// it echoes, and takes no Allow from another origin's page.
func TestDemoOAuthConsentPage(t *testing.T) {
	r := newDemoRig(t)
	state := `"><script>alert(1)</script><a href="x`
	authURL := r.conf.AuthCodeURL(state, oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))
	resp, err := http.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	h := resp.Header
	if h.Get("X-Frame-Options") != "DENY" || !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") ||
		!strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") || h.Get("Cache-Control") != "no-store" {
		t.Errorf("headers %v", h)
	}
	if strings.Contains(string(page), "<script") || strings.Contains(string(page), `<a href`) {
		t.Errorf("the page echoes markup:\n%s", page)
	}
	// Opening the page is not answering it, whatever its URL says.
	resp, err = noRedirects.Get(authURL + "&decision=allow")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Location") != "" {
		t.Errorf("GET with decision=allow: %d to %q, want the consent page", resp.StatusCode, resp.Header.Get("Location"))
	}
	// The escaped state still comes back as it was sent.
	if cb := r.consent(t, authURL, "allow"); cb.Query().Get("state") != state {
		t.Errorf("state came back as %q", cb.Query().Get("state"))
	}

	// Another origin's page posting the form is refused, and no code is made.
	form := url.Values{}
	for _, m := range hiddenRE.FindAllStringSubmatch(string(page), -1) {
		form.Set(html.UnescapeString(m[1]), html.UnescapeString(m[2]))
	}
	form.Set("decision", "allow")
	for name, header := range map[string][2]string{
		"Sec-Fetch-Site": {"Sec-Fetch-Site", "cross-site"},
		"Origin":         {"Origin", "https://evil.example"},
	} {
		req, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/oauth/authorize", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set(header[0], header[1])
		resp, err := noRedirects.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Location") != "" {
			t.Errorf("a cross-origin Allow (%s): %d to %q, want 403", name, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
}
