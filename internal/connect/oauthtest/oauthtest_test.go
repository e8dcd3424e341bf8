package oauthtest_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"golang.org/x/oauth2"

	"github.com/toolgate/toolgate/internal/connect/oauthtest"
)

const callbackURL = "https://gateway.example/connections/mail/callback"

// clock is a settable Options.Clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// config is the oauth2 client of the server, its credentials where the
// server's AuthStyle wants them.
func config(s *oauthtest.Server, opts oauthtest.Options) *oauth2.Config {
	style := oauth2.AuthStyleInHeader
	if opts.AuthStyle == "post" {
		style = oauth2.AuthStyleInParams
	}
	return &oauth2.Config{
		ClientID:     opts.ClientID,
		ClientSecret: opts.ClientSecret,
		Endpoint:     oauth2.Endpoint{AuthURL: s.AuthorizeURL(), TokenURL: s.TokenURL(), AuthStyle: style},
		RedirectURL:  callbackURL,
		Scopes:       []string{"mail.read", "mail.send"},
	}
}

// connect runs the code flow with PKCE and returns the token.
func connect(t *testing.T, s *oauthtest.Server, conf *oauth2.Config) *oauth2.Token {
	t.Helper()
	verifier := oauth2.GenerateVerifier()
	cb := s.Authorize(t, conf.AuthCodeURL("state-1", oauth2.S256ChallengeOption(verifier)))
	tok, err := conf.Exchange(t.Context(), cb.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	return tok
}

func retrieveError(t *testing.T, err error) *oauth2.RetrieveError {
	t.Helper()
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v, want an *oauth2.RetrieveError", err)
	}
	return re
}

// resource calls the resource handler with the token and returns the
// status and the answer.
func resource(t *testing.T, s *oauthtest.Server, token string) (int, map[string]string) {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/me", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	s.ResourceHandler().ServeHTTP(w, r)
	var answer map[string]string
	if err := json.Unmarshal(w.Body.Bytes(), &answer); err != nil {
		t.Fatalf("resource answered %q: %v", w.Body, err)
	}
	return w.Code, answer
}

func TestCodeFlowWithPKCE(t *testing.T) {
	for _, opts := range []oauthtest.Options{
		{ClientID: "gw", ClientSecret: "s3cret/+&=", AuthStyle: "basic"},
		{ClientID: "gw", ClientSecret: "s3cret/+&=", AuthStyle: "post"},
		{ClientID: "gw", AuthStyle: "basic"},
		{ClientID: "gw", AuthStyle: "post"},
	} {
		t.Run(fmt.Sprintf("%s,secret=%t", opts.AuthStyle, opts.ClientSecret != ""), func(t *testing.T) {
			clk := newClock()
			opts.Clock = clk.Now
			s := oauthtest.New(t, opts)
			conf := config(s, opts)
			verifier := oauth2.GenerateVerifier()
			authURL := conf.AuthCodeURL("st&te=/x?", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("login_hint", "bob@example.com"))
			cb := s.Authorize(t, authURL)
			if got := cb.Scheme + "://" + cb.Host + cb.Path; got != callbackURL {
				t.Fatalf("redirected to %s, want %s", got, callbackURL)
			}
			if cb.Query().Get("state") != "st&te=/x?" || cb.Query().Get("code") == "" {
				t.Fatalf("callback %s: want the state echoed and a code", cb)
			}
			tok, err := conf.Exchange(t.Context(), cb.Query().Get("code"), oauth2.VerifierOption(verifier))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(tok.AccessToken, "at_") || !strings.HasPrefix(tok.RefreshToken, "rt_") || tok.TokenType != "Bearer" {
				t.Errorf("token %+v", tok)
			}
			if tok.ExpiresIn != 3600 || tok.Extra("scope") != "mail.read mail.send" {
				t.Errorf("expires_in %d, scope %v; want 3600, the scope asked", tok.ExpiresIn, tok.Extra("scope"))
			}
			if sub, ok := s.Valid(tok.AccessToken); !ok || sub != "bob@example.com" {
				t.Errorf("Valid = %q, %v; want bob@example.com, true", sub, ok)
			}
			toks := s.Tokens()
			if len(toks) != 1 || toks[0].AccessToken != tok.AccessToken || !toks[0].Expiry.Equal(clk.Now().Add(time.Hour)) || toks[0].ClientID != "gw" {
				t.Errorf("Tokens = %+v", toks)
			}
			status, answer := resource(t, s, tok.AccessToken)
			if status != http.StatusOK || answer["subject"] != "bob@example.com" || answer["token"] != tok.AccessToken[len(tok.AccessToken)-4:] {
				t.Errorf("resource: %d %v", status, answer)
			}

			reqs := s.Requests()
			if len(reqs) != 2 || reqs[0].Endpoint != "authorize" || reqs[1].Endpoint != "token" {
				t.Fatalf("requests %+v", reqs)
			}
			if v := reqs[0].Values; v.Get("code_challenge") != oauth2.S256ChallengeFromVerifier(verifier) || v.Get("code_challenge_method") != "S256" {
				t.Errorf("authorize recorded %v", v)
			}
			token := reqs[1]
			if token.Values.Get("code_verifier") != verifier || token.Values.Get("redirect_uri") != callbackURL {
				t.Errorf("token recorded %v", token.Values)
			}
			if inHeader := token.Authorization != ""; inHeader != (opts.AuthStyle == "basic") {
				t.Errorf("Authorization %q with AuthStyle %s", token.Authorization, opts.AuthStyle)
			}
			if s.Count("token", "authorization_code") != 1 || s.Count("token", "refresh_token") != 0 || s.Count("authorize", "") != 1 {
				t.Errorf("counts wrong: %+v", reqs)
			}

			clk.Advance(time.Hour)
			if _, ok := s.Valid(tok.AccessToken); ok {
				t.Error("token valid after its expiry")
			}
			if status, _ := resource(t, s, tok.AccessToken); status != http.StatusUnauthorized {
				t.Errorf("resource with an expired token: %d", status)
			}
		})
	}
}

func TestWrongVerifierRefused(t *testing.T) {
	opts := oauthtest.Options{ClientID: "gw", ClientSecret: "pw"}
	s := oauthtest.New(t, opts)
	conf := config(s, opts)
	verifier := oauth2.GenerateVerifier()
	cb := s.Authorize(t, conf.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier)))
	code := cb.Query().Get("code")
	_, err := conf.Exchange(t.Context(), code, oauth2.VerifierOption(oauth2.GenerateVerifier()))
	if re := retrieveError(t, err); re.ErrorCode != "invalid_grant" {
		t.Fatalf("wrong verifier: %v", err)
	}
	// The code is spent: the right verifier cannot follow a guess.
	_, err = conf.Exchange(t.Context(), code, oauth2.VerifierOption(verifier))
	if re := retrieveError(t, err); re.ErrorCode != "invalid_grant" {
		t.Fatalf("right verifier after a wrong one: %v", err)
	}
	// Nor may the verifier be left out.
	cb = s.Authorize(t, conf.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier)))
	_, err = conf.Exchange(t.Context(), cb.Query().Get("code"))
	if re := retrieveError(t, err); re.ErrorCode != "invalid_grant" {
		t.Fatalf("no verifier: %v", err)
	}
	if len(s.Tokens()) != 0 {
		t.Errorf("tokens issued: %+v", s.Tokens())
	}
}

func TestCodeBoundToRedirectAndClient(t *testing.T) {
	opts := oauthtest.Options{ClientSecret: "pw"} // any client id
	s := oauthtest.New(t, opts)
	for name, change := range map[string]func(*oauth2.Config){
		"redirect_uri": func(c *oauth2.Config) { c.RedirectURL = "https://evil.example/cb" },
		"client_id":    func(c *oauth2.Config) { c.ClientID = "other" },
	} {
		t.Run(name, func(t *testing.T) {
			conf := config(s, oauthtest.Options{ClientID: "gw", ClientSecret: "pw"})
			verifier := oauth2.GenerateVerifier()
			cb := s.Authorize(t, conf.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier)))
			change(conf)
			_, err := conf.Exchange(t.Context(), cb.Query().Get("code"), oauth2.VerifierOption(verifier))
			if re := retrieveError(t, err); re.ErrorCode != "invalid_grant" {
				t.Fatalf("exchange with another %s: %v", name, err)
			}
		})
	}
}

func TestRefreshBoundToClient(t *testing.T) {
	s := oauthtest.New(t, oauthtest.Options{}) // any client id
	conf := config(s, oauthtest.Options{ClientID: "gw"})
	tok := connect(t, s, conf)
	other := *conf
	other.ClientID = "other"
	_, err := other.TokenSource(t.Context(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
	if re := retrieveError(t, err); re.ErrorCode != "invalid_grant" {
		t.Fatalf("refresh by another client: %v", err)
	}
	if _, err := conf.TokenSource(t.Context(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token(); err != nil {
		t.Errorf("refresh by its client, after another's was refused: %v", err)
	}
}

func TestCodeExpires(t *testing.T) {
	clk := newClock()
	opts := oauthtest.Options{ClientID: "gw", ClientSecret: "pw", Clock: clk.Now}
	s := oauthtest.New(t, opts)
	conf := config(s, opts)
	verifier := oauth2.GenerateVerifier()
	cb := s.Authorize(t, conf.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier)))
	clk.Advance(time.Minute)
	_, err := conf.Exchange(t.Context(), cb.Query().Get("code"), oauth2.VerifierOption(verifier))
	if re := retrieveError(t, err); re.ErrorCode != "invalid_grant" {
		t.Fatalf("expired code: %v", err)
	}
}

func TestCodeReuseRevokesItsTokens(t *testing.T) {
	opts := oauthtest.Options{ClientID: "gw", ClientSecret: "pw"}
	s := oauthtest.New(t, opts)
	conf := config(s, opts)
	verifier := oauth2.GenerateVerifier()
	cb := s.Authorize(t, conf.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier)))
	code := cb.Query().Get("code")
	first, err := conf.Exchange(t.Context(), code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	refreshed, err := conf.TokenSource(t.Context(), &oauth2.Token{RefreshToken: first.RefreshToken}).Token()
	if err != nil {
		t.Fatal(err)
	}
	// An unrelated connection, which the reuse must leave alone.
	other := connect(t, s, conf)

	_, err = conf.Exchange(t.Context(), code, oauth2.VerifierOption(verifier))
	if re := retrieveError(t, err); re.ErrorCode != "invalid_grant" {
		t.Fatalf("reused code: %v", err)
	}
	for _, at := range []string{first.AccessToken, refreshed.AccessToken} {
		if _, ok := s.Valid(at); ok {
			t.Errorf("%s still valid after its code was reused", at)
		}
		if status, _ := resource(t, s, at); status != http.StatusUnauthorized {
			t.Errorf("resource accepted revoked %s: %d", at, status)
		}
	}
	_, err = conf.TokenSource(t.Context(), &oauth2.Token{RefreshToken: refreshed.RefreshToken}).Token()
	if re := retrieveError(t, err); re.ErrorCode != "invalid_grant" {
		t.Errorf("refresh from a revoked code: %v", err)
	}
	if _, ok := s.Valid(other.AccessToken); !ok {
		t.Error("another code's token revoked too")
	}
	revoked := 0
	for _, tok := range s.Tokens() {
		if tok.Revoked {
			revoked++
		}
	}
	if revoked != 2 {
		t.Errorf("%d tokens marked revoked, want 2: %+v", revoked, s.Tokens())
	}
}

func TestRefreshRotates(t *testing.T) {
	opts := oauthtest.Options{ClientID: "gw", ClientSecret: "pw", AuthStyle: "post"}
	s := oauthtest.New(t, opts)
	conf := config(s, opts)
	first := connect(t, s, conf)
	second, err := conf.TokenSource(t.Context(), &oauth2.Token{RefreshToken: first.RefreshToken}).Token()
	if err != nil {
		t.Fatal(err)
	}
	if second.AccessToken == first.AccessToken || second.RefreshToken == first.RefreshToken || second.RefreshToken == "" {
		t.Fatalf("refresh gave %+v after %+v", second, first)
	}
	if sub, ok := s.Valid(second.AccessToken); !ok || sub != "alice@example.com" {
		t.Errorf("refreshed token: Valid = %q, %v", sub, ok)
	}
	_, err = conf.TokenSource(t.Context(), &oauth2.Token{RefreshToken: first.RefreshToken}).Token()
	if re := retrieveError(t, err); re.ErrorCode != "invalid_grant" {
		t.Errorf("rotated refresh token used again: %v", err)
	}
	if n := s.Count("token", "refresh_token"); n != 2 {
		t.Errorf("Count(token, refresh_token) = %d, want 2", n)
	}
}

func TestRefreshScopeNarrowsOnly(t *testing.T) {
	opts := oauthtest.Options{ClientID: "gw", ClientSecret: "pw"}
	s := oauthtest.New(t, opts)
	tok := connect(t, s, config(s, opts))
	refresh := func(scope string) (int, map[string]any) {
		return post(t, s.TokenURL(), url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}, "scope": {scope}}, "gw", "pw")
	}
	if status, answer := refresh("mail.read mail.admin"); status != http.StatusBadRequest || answer["error"] != "invalid_scope" {
		t.Fatalf("widened scope: %d %v", status, answer)
	}
	// The refused widening spent nothing.
	status, answer := refresh("mail.read")
	if status != http.StatusOK || answer["scope"] != "mail.read" {
		t.Fatalf("narrowed scope: %d %v", status, answer)
	}
	if toks := s.Tokens(); len(toks) != 2 || toks[1].Scope != "mail.read" {
		t.Errorf("Tokens = %+v", toks)
	}
}

// post sends a form with HTTP Basic credentials and returns the status and
// the JSON answer.
func post(t *testing.T, endpoint string, form url.Values, user, password string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(user, password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer map[string]any
	if err := json.UnmarshalRead(resp.Body, &answer); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, answer
}

func TestConcurrentRefreshesOneWins(t *testing.T) {
	opts := oauthtest.Options{ClientID: "gw", ClientSecret: "pw"}
	s := oauthtest.New(t, opts)
	conf := config(s, opts)
	tok := connect(t, s, conf)
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := conf.TokenSource(t.Context(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	won := 0
	for err := range errs {
		if err == nil {
			won++
		} else if re := retrieveError(t, err); re.ErrorCode != "invalid_grant" {
			t.Errorf("losing refresh: %v", err)
		}
	}
	if won != 1 || s.Count("token", "refresh_token") != n || len(s.Tokens()) != 2 {
		t.Errorf("%d refreshes won, %d counted, %d tokens; want 1, %d, 2", won, s.Count("token", "refresh_token"), len(s.Tokens()), n)
	}
}

func TestFailRefresh(t *testing.T) {
	opts := oauthtest.Options{ClientID: "gw", ClientSecret: "pw"}
	s := oauthtest.New(t, opts)
	conf := config(s, opts)
	tok := connect(t, s, conf)
	refresh := func() (*oauth2.Token, error) {
		return conf.TokenSource(t.Context(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
	}

	s.FailRefresh("invalid_grant")
	_, err := refresh()
	if re := retrieveError(t, err); re.ErrorCode != "invalid_grant" || re.Response.StatusCode != http.StatusBadRequest {
		t.Fatalf("FailRefresh(invalid_grant): %v", err)
	}
	s.FailRefreshStatus(http.StatusInternalServerError)
	_, err = refresh()
	if re := retrieveError(t, err); re.Response.StatusCode != http.StatusInternalServerError || re.ErrorCode != "" {
		t.Fatalf("FailRefreshStatus(500): %v", err)
	}
	// Failures change nothing: the refresh token still works afterwards.
	s.FailRefreshStatus(0)
	if _, err := refresh(); err != nil {
		t.Fatalf("after FailRefreshStatus(0): %v", err)
	}
	if n := s.Count("token", "refresh_token"); n != 3 {
		t.Errorf("Count(token, refresh_token) = %d, want 3", n)
	}
}

func TestClientAuthentication(t *testing.T) {
	for _, tc := range []struct {
		name   string
		server oauthtest.Options
		client oauthtest.Options
	}{
		{"wrong secret, basic", oauthtest.Options{ClientID: "gw", ClientSecret: "pw"}, oauthtest.Options{ClientID: "gw", ClientSecret: "nope"}},
		{"wrong secret, post", oauthtest.Options{ClientID: "gw", ClientSecret: "pw", AuthStyle: "post"}, oauthtest.Options{ClientID: "gw", ClientSecret: "nope", AuthStyle: "post"}},
		{"wrong id", oauthtest.Options{ClientID: "gw", ClientSecret: "pw"}, oauthtest.Options{ClientID: "gx", ClientSecret: "pw"}},
		{"no secret", oauthtest.Options{ClientID: "gw", ClientSecret: "pw"}, oauthtest.Options{ClientID: "gw"}},
		{"in the form, basic wanted", oauthtest.Options{ClientID: "gw", ClientSecret: "pw"}, oauthtest.Options{ClientID: "gw", ClientSecret: "pw", AuthStyle: "post"}},
		{"in a header, post wanted", oauthtest.Options{ClientID: "gw", ClientSecret: "pw", AuthStyle: "post"}, oauthtest.Options{ClientID: "gw", ClientSecret: "pw", AuthStyle: "basic"}},
		{"a secret for a public client", oauthtest.Options{ClientID: "gw"}, oauthtest.Options{ClientID: "gw", ClientSecret: "pw", AuthStyle: "basic"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := oauthtest.New(t, tc.server)
			good := config(s, tc.server)
			verifier := oauth2.GenerateVerifier()
			cb := s.Authorize(t, good.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier)))
			_, err := config(s, tc.client).Exchange(t.Context(), cb.Query().Get("code"), oauth2.VerifierOption(verifier))
			re := retrieveError(t, err)
			if re.Response.StatusCode != http.StatusUnauthorized || re.ErrorCode != "invalid_client" {
				t.Fatalf("got %v, want 401 invalid_client", err)
			}
			if len(s.Tokens()) != 0 {
				t.Error("a token was issued")
			}
			// The code survives a client that failed to authenticate.
			if _, err := good.Exchange(t.Context(), cb.Query().Get("code"), oauth2.VerifierOption(verifier)); err != nil {
				t.Errorf("the right client after a wrong one: %v", err)
			}
		})
	}
}

func TestDeny(t *testing.T) {
	opts := oauthtest.Options{ClientID: "gw", ClientSecret: "pw"}
	s := oauthtest.New(t, opts)
	conf := config(s, opts)
	s.Deny(true)
	cb := s.Authorize(t, conf.AuthCodeURL("st 1", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
	q := cb.Query()
	if q.Get("error") != "access_denied" || q.Get("state") != "st 1" || q.Has("code") {
		t.Fatalf("denied: callback %s", cb)
	}
	s.Deny(false)
	s.SetSubject("carol@example.com")
	tok := connect(t, s, conf)
	if sub, _ := s.Valid(tok.AccessToken); sub != "carol@example.com" {
		t.Errorf("subject %q, want the one SetSubject named", sub)
	}
}

func TestAuthorizeRefusals(t *testing.T) {
	s := oauthtest.New(t, oauthtest.Options{ClientID: "gw"})
	challenge := oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())
	good := url.Values{
		"response_type": {"code"}, "client_id": {"gw"}, "redirect_uri": {callbackURL + "?keep=1"},
		"code_challenge": {challenge}, "code_challenge_method": {"S256"}, "state": {"st"}, "scope": {"mail.read"},
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(t *testing.T, q url.Values) *http.Response {
		t.Helper()
		resp, err := client.Get(s.AuthorizeURL() + "?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	with := func(k string, v ...string) url.Values {
		q := url.Values{}
		for key, vs := range good {
			q[key] = vs
		}
		if v == nil {
			delete(q, k)
		} else {
			q[k] = v
		}
		return q
	}

	resp := get(t, good)
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || loc.Query().Get("keep") != "1" || loc.Query().Get("code") == "" {
		t.Fatalf("good request: %s, Location %s", resp.Status, loc)
	}

	// Not redirected: the redirect itself is in doubt.
	for name, q := range map[string]url.Values{
		"no client_id":           with("client_id"),
		"wrong client_id":        with("client_id", "other"),
		"no redirect_uri":        with("redirect_uri"),
		"relative redirect_uri":  with("redirect_uri", "/callback"),
		"javascript redirect":    with("redirect_uri", "javascript:alert(1)"),
		"redirect with fragment": with("redirect_uri", callbackURL+"#x"),
		"redirect with userinfo": with("redirect_uri", "https://user:pw@gateway.example/cb"),
		"client_id twice":        with("client_id", "gw", "other"),
		"redirect_uri twice":     with("redirect_uri", callbackURL, "https://evil.example/cb"),
	} {
		t.Run(name, func(t *testing.T) {
			resp := get(t, q)
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
				t.Errorf("%s, Location %q; want 400 and no redirect", resp.Status, resp.Header.Get("Location"))
			}
		})
	}

	// Redirected with an OAuth error and the state.
	for name, tc := range map[string]struct {
		q    url.Values
		want string
	}{
		"plain challenge":     {with("code_challenge_method", "plain"), "invalid_request"},
		"no challenge method": {with("code_challenge_method"), "invalid_request"},
		"no challenge":        {with("code_challenge"), "invalid_request"},
		"short challenge":     {with("code_challenge", "abc"), "invalid_request"},
		"token response":      {with("response_type", "token"), "unsupported_response_type"},
		"no state":            {with("state"), "invalid_request"},
	} {
		t.Run(name, func(t *testing.T) {
			resp := get(t, tc.q)
			loc, _ := url.Parse(resp.Header.Get("Location"))
			q := loc.Query()
			if resp.StatusCode != http.StatusFound || q.Get("error") != tc.want || q.Has("code") || q.Get("state") != tc.q.Get("state") {
				t.Errorf("%s, Location %s; want a redirect with error %s", resp.Status, loc, tc.want)
			}
		})
	}
	if n := s.Count("authorize", ""); n != 16 {
		t.Errorf("Count(authorize) = %d, want every request, 16", n)
	}
}

func TestTokenEndpointRefusals(t *testing.T) {
	s := oauthtest.New(t, oauthtest.Options{ClientID: "gw", AuthStyle: "post"})
	form := "grant_type=refresh_token&refresh_token=rt_x&client_id=gw"
	const urlencoded = "application/x-www-form-urlencoded"
	for name, tc := range map[string]struct {
		method, url, contentType, body string
		status                         int
		error                          string // the OAuth error; "" for a plain-text answer
	}{
		"GET":               {http.MethodGet, s.TokenURL() + "?" + form, "", "", http.StatusMethodNotAllowed, ""},
		"JSON body":         {http.MethodPost, s.TokenURL(), "application/json", `{"grant_type":"refresh_token"}`, http.StatusBadRequest, "invalid_request"},
		"parameters in URL": {http.MethodPost, s.TokenURL() + "?client_secret=x", urlencoded, form, http.StatusBadRequest, "invalid_request"},
		"parameter twice":   {http.MethodPost, s.TokenURL(), urlencoded, form + "&refresh_token=rt_y", http.StatusBadRequest, "invalid_request"},
		"huge body":         {http.MethodPost, s.TokenURL(), urlencoded, form + "&x=" + strings.Repeat("a", 70<<10), http.StatusBadRequest, "invalid_request"},
		"unknown grant":     {http.MethodPost, s.TokenURL(), urlencoded, "grant_type=password&client_id=gw", http.StatusBadRequest, "unsupported_grant_type"},
		"unknown refresh":   {http.MethodPost, s.TokenURL(), urlencoded, form, http.StatusBadRequest, "invalid_grant"},
		"unknown code":      {http.MethodPost, s.TokenURL(), urlencoded, "grant_type=authorization_code&code=x&client_id=gw", http.StatusBadRequest, "invalid_grant"},
		"no client":         {http.MethodPost, s.TokenURL(), urlencoded, "grant_type=authorization_code&code=x", http.StatusUnauthorized, "invalid_client"},
	} {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), tc.method, tc.url, strings.NewReader(tc.body))
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			var answer struct {
				Error string `json:"error"`
			}
			if tc.error != "" {
				if err := json.Unmarshal(body, &answer); err != nil {
					t.Fatalf("%s %s: %v", resp.Status, body, err)
				}
			}
			if resp.StatusCode != tc.status || answer.Error != tc.error {
				t.Errorf("%s %s; want %d %s", resp.Status, body, tc.status, tc.error)
			}
		})
	}
	if len(s.Tokens()) != 0 || s.Count("token", "") != 9 {
		t.Errorf("%d tokens, %d requests counted; want 0, 9", len(s.Tokens()), s.Count("token", ""))
	}
}

// TestCredentialsInOnePlace: a client that authenticates with HTTP Basic
// and also puts its secret in the form is refused, right as both are.
func TestCredentialsInOnePlace(t *testing.T) {
	opts := oauthtest.Options{ClientID: "gw", ClientSecret: "pw"}
	s := oauthtest.New(t, opts)
	tok := connect(t, s, config(s, opts))
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}}
	form.Set("client_secret", "pw")
	if status, answer := post(t, s.TokenURL(), form, "gw", "pw"); status != http.StatusUnauthorized || answer["error"] != "invalid_client" {
		t.Errorf("secret in both places: %d %v", status, answer)
	}
	form.Del("client_secret")
	form.Set("client_id", "other")
	if status, answer := post(t, s.TokenURL(), form, "gw", "pw"); status != http.StatusUnauthorized || answer["error"] != "invalid_client" {
		t.Errorf("client_id in the form differing from Basic's: %d %v", status, answer)
	}
	form.Set("client_id", "gw")
	if status, answer := post(t, s.TokenURL(), form, "gw", "pw"); status != http.StatusOK {
		t.Errorf("client_id in the form agreeing with Basic's: %d %v", status, answer)
	}
}

func TestTokenLifetime(t *testing.T) {
	clk := newClock()
	opts := oauthtest.Options{ClientID: "gw", TokenLifetime: -1, Clock: clk.Now}
	s := oauthtest.New(t, opts)
	tok := connect(t, s, config(s, opts))
	if tok.ExpiresIn != 0 || !tok.Expiry.IsZero() {
		t.Errorf("TokenLifetime -1: expires_in %d, expiry %v; want neither", tok.ExpiresIn, tok.Expiry)
	}
	clk.Advance(1000 * time.Hour)
	if _, ok := s.Valid(tok.AccessToken); !ok {
		t.Error("a token without expiry expired")
	}

	opts.TokenLifetime = 90 * time.Second
	s = oauthtest.New(t, opts)
	tok = connect(t, s, config(s, opts))
	if tok.ExpiresIn != 90 {
		t.Errorf("expires_in %d, want 90", tok.ExpiresIn)
	}
	clk.Advance(89 * time.Second)
	if _, ok := s.Valid(tok.AccessToken); !ok {
		t.Error("expired early")
	}
	clk.Advance(time.Second)
	if _, ok := s.Valid(tok.AccessToken); ok {
		t.Error("valid at its expiry")
	}
}

func TestExchange(t *testing.T) {
	s := oauthtest.New(t, oauthtest.Options{
		ClientID: "gw", ClientSecret: "pw",
		VerifySubject: func(token string) (string, error) {
			sub, ok := strings.CutPrefix(token, "signed:")
			if !ok {
				return "", errors.New("bad signature")
			}
			return sub, nil
		},
	})
	exchange := func(t *testing.T, form url.Values, secret string) (int, map[string]any) {
		t.Helper()
		return post(t, s.ExchangeURL(), form, "gw", secret)
	}
	form := func(subject, tokenType string) url.Values {
		return url.Values{
			"grant_type":         {"urn:ietf:params:oauth:grant-type:token-exchange"},
			"subject_token":      {subject},
			"subject_token_type": {tokenType},
			"audience":           {"https://api.example"},
		}
	}
	const jwtType = "urn:ietf:params:oauth:token-type:jwt"

	status, answer := exchange(t, form("signed:dave@example.com", jwtType), "pw")
	if status != http.StatusOK || answer["issued_token_type"] != "urn:ietf:params:oauth:token-type:access_token" || answer["token_type"] != "Bearer" || answer["expires_in"] != 3600.0 {
		t.Fatalf("exchange: %d %v", status, answer)
	}
	at, _ := answer["access_token"].(string)
	if sub, ok := s.Valid(at); !ok || sub != "dave@example.com" {
		t.Errorf("exchanged token: Valid = %q, %v", sub, ok)
	}
	if toks := s.Tokens(); len(toks) != 1 || toks[0].Audience != "https://api.example" {
		t.Errorf("Tokens = %+v, want the audience recorded", toks)
	}
	if reqs := s.Requests(); len(reqs) != 1 || reqs[0].Endpoint != "exchange" || reqs[0].Values.Get("audience") != "https://api.example" {
		t.Errorf("Requests = %+v", reqs)
	}

	for name, tc := range map[string]struct {
		form   url.Values
		secret string
		status int
		error  string
	}{
		"access token as subject": {form("signed:dave@example.com", "urn:ietf:params:oauth:token-type:access_token"), "pw", 400, "invalid_request"},
		"no subject token type":   {form("signed:dave@example.com", ""), "pw", 400, "invalid_request"},
		"unverified subject":      {form("forged:dave@example.com", jwtType), "pw", 400, "invalid_grant"},
		"wrong client secret":     {form("signed:dave@example.com", jwtType), "nope", 401, "invalid_client"},
	} {
		t.Run(name, func(t *testing.T) {
			status, answer := exchange(t, tc.form, tc.secret)
			if status != tc.status || answer["error"] != tc.error {
				t.Errorf("%d %v; want %d %s", status, answer, tc.status, tc.error)
			}
		})
	}
	if n := s.Count("exchange", "urn:ietf:params:oauth:grant-type:token-exchange"); n != 5 || len(s.Tokens()) != 1 {
		t.Errorf("%d exchanges counted, %d tokens; want 5, 1", n, len(s.Tokens()))
	}
}

func TestResourceHandlerRefusals(t *testing.T) {
	opts := oauthtest.Options{ClientID: "gw"}
	s := oauthtest.New(t, opts)
	tok := connect(t, s, config(s, opts))
	srv := httptest.NewServer(s.ResourceHandler())
	t.Cleanup(srv.Close)
	for name, header := range map[string]string{
		"none":          "",
		"unknown token": "Bearer at_unknown",
		"refresh token": "Bearer " + tok.RefreshToken,
		"basic":         "Basic " + tok.AccessToken,
		"token alone":   tok.AccessToken,
		"more after it": "Bearer " + tok.AccessToken + " x",
	} {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/me", nil)
			if header != "" {
				req.Header.Set("Authorization", header)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s, WWW-Authenticate %q", resp.Status, resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/me", nil)
	req.Header.Set("Authorization", "bearer "+tok.AccessToken)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("lower-case scheme: %s", resp.Status)
	}
	hits := s.ResourceHits()
	if len(hits) != 7 || hits[6].Subject != "alice@example.com" || hits[6].Path != "/me" || hits[0].Subject != "" {
		t.Errorf("hits %+v", hits)
	}
}

func TestAuthorizeOnlyThisServer(t *testing.T) {
	s := oauthtest.New(t, oauthtest.Options{})
	other := oauthtest.New(t, oauthtest.Options{})
	ft := &fatalRecorder{TB: t}
	func() {
		defer func() { _ = recover() }()
		s.Authorize(ft, other.AuthorizeURL()+"?client_id=x")
	}()
	if !ft.failed {
		t.Error("Authorize followed another server's authorization URL")
	}
	if len(other.Requests()) != 0 {
		t.Error("Authorize sent a request to another server")
	}
}

// fatalRecorder notes a Fatalf instead of ending the test, and ends the
// call with a panic as Fatalf would end the goroutine.
type fatalRecorder struct {
	testing.TB
	failed bool
}

func (f *fatalRecorder) Fatalf(string, ...any) {
	f.failed = true
	panic("fatal")
}

func TestNew(t *testing.T) {
	ft := &fatalRecorder{TB: t}
	func() {
		defer func() { _ = recover() }()
		oauthtest.New(ft, oauthtest.Options{AuthStyle: "auto"})
	}()
	if !ft.failed {
		t.Error("New took AuthStyle auto")
	}

	var tokenURL string
	t.Run("server", func(t *testing.T) {
		tokenURL = oauthtest.New(t, oauthtest.Options{}).TokenURL()
	})
	if resp, err := http.Post(tokenURL, "application/x-www-form-urlencoded", nil); err == nil {
		resp.Body.Close()
		t.Error("the server still answers after its test ended")
	}
}
