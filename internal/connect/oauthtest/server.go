// Package oauthtest runs an OAuth 2.0 authorization server on loopback for
// tests of connections: the authorization code flow with PKCE S256,
// refresh with rotation, RFC 8693 token exchange, and a resource endpoint
// that checks the tokens it issued. It records every request it receives,
// so a test can assert what the gateway sent, and can be told to deny,
// or to fail refreshes, to test how the gateway answers.
package oauthtest

import (
	"crypto/rand"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"
)

// Options configure a Server. The zero value is a server for a public
// client of any id, whose access tokens live an hour.
type Options struct {
	// ClientID is the only client the server knows. Empty: any client_id is
	// accepted and no client is authenticated.
	ClientID string
	// ClientSecret is the client's secret. Empty: a public client, which
	// names itself (client_id) and has no secret to present.
	ClientSecret string
	// TokenLifetime is how long an access token is valid, announced as
	// expires_in. Zero means an hour; a negative value means the token
	// never expires and no expires_in is sent.
	TokenLifetime time.Duration
	// Clock says the time for codes', tokens' and Valid's expiry checks.
	// Default: time.Now.
	Clock func() time.Time
	// AuthStyle is where the client must put its credentials at the token
	// and exchange endpoints: "basic" (HTTP Basic, form-encoded id and
	// secret) or "post" (client_id and client_secret in the form). A
	// request that uses the other place too is refused. Default: basic.
	AuthStyle string
	// VerifySubject checks an exchange's subject_token and names its
	// subject; an error refuses the exchange (invalid_grant). Default:
	// every subject token is taken as the subject SetSubject names.
	VerifySubject func(token string) (subject string, err error)
}

// The lifetimes of what the server issues.
const (
	defaultTokenLifetime = time.Hour
	codeLifetime         = time.Minute
)

// Server is a running authorization server. It is safe for concurrent
// use.
type Server struct {
	// URL is the server's base URL, http://127.0.0.1:PORT.
	URL string

	opts Options
	srv  *httptest.Server

	mu          sync.Mutex
	subject     string
	deny        bool
	failCode    string // FailRefresh
	failStatus  int    // FailRefreshStatus
	codes       map[string]*code
	refreshes   map[string]*refresh
	access      map[string]*issued
	issuedOrder []*issued
	requests    []Request
	hits        []Hit
}

// Request is one request the server received, refused or not.
type Request struct {
	// Endpoint is "authorize", "token" or "exchange".
	Endpoint string
	// Method is the request's HTTP method.
	Method string
	// Values are the authorize endpoint's query, or the other endpoints'
	// form body; nil when the body could not be read as a form.
	Values url.Values
	// Authorization is the request's Authorization header.
	Authorization string
}

// Token is an access token the server issued.
type Token struct {
	AccessToken string
	// Subject is the user the token acts for.
	Subject string
	// ClientID is the client it was issued to; empty for an exchange
	// without client authentication.
	ClientID string
	Scope    string
	// Audience is an exchange's audience.
	Audience string
	// Expiry is when the token stops being valid; zero when it never does.
	Expiry time.Time
	// Revoked is set when the code it came from was used again.
	Revoked bool
}

// Hit is one request to the resource endpoint.
type Hit struct {
	Method        string
	Path          string
	Authorization string
	// Subject is whose token it was; empty when the request was refused.
	Subject string
}

// A code is an authorization code and what it was issued for.
type code struct {
	clientID    string
	redirectURI string
	challenge   string
	scope       string
	subject     string
	expires     time.Time
	used        bool
	family      *family
}

// A refresh token and what it refreshes.
type refresh struct {
	clientID string
	scope    string
	subject  string
	used     bool // rotated
	family   *family
}

// issued is an access token and the family it belongs to.
type issued struct {
	Token
	family *family
}

// A family is every token issued from one authorization code, directly or
// by refreshes: using the code again revokes them all (RFC 6749 §4.1.2).
type family struct {
	revoked bool
}

// New starts a server, closed when the test ends.
func New(t testing.TB, opts Options) *Server {
	t.Helper()
	switch opts.AuthStyle {
	case "":
		opts.AuthStyle = "basic"
	case "basic", "post":
	default:
		t.Fatalf("oauthtest: AuthStyle %q is neither basic nor post", opts.AuthStyle)
	}
	if opts.TokenLifetime == 0 {
		opts.TokenLifetime = defaultTokenLifetime
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	s := &Server{
		opts:      opts,
		subject:   "alice@example.com",
		codes:     map[string]*code{},
		refreshes: map[string]*refresh{},
		access:    map[string]*issued{},
	}
	mux := http.NewServeMux()
	// No method in the patterns: a request with the wrong method is
	// recorded and refused like any other.
	mux.HandleFunc("/authorize", s.authorize)
	mux.HandleFunc("/token", s.token)
	mux.HandleFunc("/exchange", s.exchange)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

// AuthorizeURL is the authorization endpoint.
func (s *Server) AuthorizeURL() string { return s.URL + "/authorize" }

// TokenURL is the token endpoint.
func (s *Server) TokenURL() string { return s.URL + "/token" }

// ExchangeURL is the RFC 8693 token exchange endpoint.
func (s *Server) ExchangeURL() string { return s.URL + "/exchange" }

// SetSubject names the user who consents at the authorization page when
// its URL has no login_hint. Default: alice@example.com.
func (s *Server) SetSubject(subject string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subject = subject
}

// Deny makes the user refuse (deny true) or grant (false) consent: the
// authorization page then redirects with error=access_denied.
func (s *Server) Deny(deny bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deny = deny
}

// FailRefresh makes every refresh answer 400 with the OAuth error code
// ("invalid_grant"), changing nothing; "" makes refreshes work again. It
// replaces a FailRefreshStatus.
func (s *Server) FailRefresh(errorCode string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failCode, s.failStatus = errorCode, 0
}

// FailRefreshStatus makes every refresh answer the HTTP status (500) with
// a plain-text body, changing nothing; 0 makes refreshes work again. It
// replaces a FailRefresh.
func (s *Server) FailRefreshStatus(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failCode, s.failStatus = "", status
}

// Requests returns every request the server received, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		r.Values = copyValues(r.Values)
		out[i] = r
	}
	return out
}

// Count returns how many requests the endpoint received with the
// grant_type; an empty grantType counts them all.
func (s *Server) Count(endpoint, grantType string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		if r.Endpoint == endpoint && (grantType == "" || r.Values.Get("grant_type") == grantType) {
			n++
		}
	}
	return n
}

// Tokens returns the access tokens the server issued, in order.
func (s *Server) Tokens() []Token {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Token, len(s.issuedOrder))
	for i, is := range s.issuedOrder {
		out[i] = is.Token
		out[i].Revoked = is.family != nil && is.family.revoked
	}
	return out
}

// Valid says whether the access token is one the server issued, not
// revoked and not expired, and whose it is.
func (s *Server) Valid(accessToken string) (subject string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.validLocked(accessToken)
}

func (s *Server) validLocked(accessToken string) (string, bool) {
	is, ok := s.access[accessToken]
	if !ok || (is.family != nil && is.family.revoked) {
		return "", false
	}
	if !is.Expiry.IsZero() && !s.opts.Clock().Before(is.Expiry) {
		return "", false
	}
	return is.Subject, true
}

// record keeps a request; values may be nil.
func (s *Server) record(endpoint string, r *http.Request, values url.Values) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{
		Endpoint:      endpoint,
		Method:        r.Method,
		Values:        copyValues(values),
		Authorization: r.Header.Get("Authorization"),
	})
}

// issueLocked makes an access token for the subject; a zero expiry when
// tokens never expire.
func (s *Server) issueLocked(tok Token, fam *family) (accessToken string, expiresIn int64) {
	tok.AccessToken = "at_" + rand.Text()
	if s.opts.TokenLifetime > 0 {
		// Whole seconds, rounded up, so that the expiry recorded is the one
		// a client computes from expires_in.
		expiresIn = int64(math.Ceil(s.opts.TokenLifetime.Seconds()))
		tok.Expiry = s.opts.Clock().Add(time.Duration(expiresIn) * time.Second)
	}
	is := &issued{Token: tok, family: fam}
	s.access[tok.AccessToken] = is
	s.issuedOrder = append(s.issuedOrder, is)
	return tok.AccessToken, expiresIn
}

// refreshLocked makes a refresh token.
func (s *Server) refreshLocked(rt *refresh) string {
	token := "rt_" + rand.Text()
	s.refreshes[token] = rt
	return token
}

func copyValues(v url.Values) url.Values {
	if v == nil {
		return nil
	}
	out := maps.Clone(v)
	for k, vs := range out {
		out[k] = slices.Clone(vs)
	}
	return out
}
