package oauthtest

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"
)

// The grant and token types the endpoints take and give.
const (
	grantCode        = "authorization_code"
	grantRefresh     = "refresh_token"
	grantExchange    = "urn:ietf:params:oauth:grant-type:token-exchange"
	tokenTypeJWT     = "urn:ietf:params:oauth:token-type:jwt"
	tokenTypeAccess  = "urn:ietf:params:oauth:token-type:access_token"
	maxFormBodyBytes = 64 << 10
)

// tokenResponse is a successful answer of the token and exchange
// endpoints (RFC 6749 §5.1, RFC 8693 §2.2.1).
type tokenResponse struct {
	AccessToken     string `json:"access_token"`
	IssuedTokenType string `json:"issued_token_type,omitempty"`
	TokenType       string `json:"token_type"`
	ExpiresIn       int64  `json:"expires_in,omitzero"`
	RefreshToken    string `json:"refresh_token,omitempty"`
	Scope           string `json:"scope,omitempty"`
}

// oauthError is an error answer (RFC 6749 §5.2).
type oauthError struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

// token is the token endpoint: authorization codes and refresh tokens.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	form, ok := s.readForm("token", w, r)
	if !ok {
		return
	}
	clientID, err := s.client(r, form)
	if err != nil {
		s.refuseClient(w, err)
		return
	}
	switch form.Get("grant_type") {
	case grantCode:
		s.redeemCode(w, clientID, form)
	case grantRefresh:
		s.refresh(w, clientID, form)
	default:
		writeError(w, http.StatusBadRequest, "unsupported_grant_type", "grant_type must be authorization_code or refresh_token")
	}
}

// verifierRE is a PKCE code verifier (RFC 7636 §4.1).
var verifierRE = regexp.MustCompile(`^[A-Za-z0-9._~-]{43,128}$`)

// redeemCode exchanges an authorization code. A code is consumed by the
// first request that names it, right or wrong, so a wrong verifier cannot
// be retried; a code named again revokes the tokens issued from it.
func (s *Server) redeemCode(w http.ResponseWriter, clientID string, form url.Values) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.codes[form.Get("code")]
	switch {
	case !ok:
		writeError(w, http.StatusBadRequest, "invalid_grant", "unknown code")
		return
	case c.used:
		if c.family != nil {
			c.family.revoked = true
		}
		writeError(w, http.StatusBadRequest, "invalid_grant", "code already used")
		return
	}
	c.used = true
	verifier := form.Get("code_verifier")
	switch {
	case !s.opts.Clock().Before(c.expires):
		writeError(w, http.StatusBadRequest, "invalid_grant", "code expired")
	case c.clientID != clientID:
		writeError(w, http.StatusBadRequest, "invalid_grant", "code issued to another client")
	case c.redirectURI != form.Get("redirect_uri"):
		writeError(w, http.StatusBadRequest, "invalid_grant", "redirect_uri differs from the authorization request's")
	case !verifierRE.MatchString(verifier):
		writeError(w, http.StatusBadRequest, "invalid_grant", "code_verifier is missing or malformed")
	case !equal(s256(verifier), c.challenge):
		writeError(w, http.StatusBadRequest, "invalid_grant", "code_verifier does not match code_challenge")
	default:
		c.family = &family{}
		access, expiresIn := s.issueLocked(Token{Subject: c.subject, ClientID: clientID, Scope: c.scope}, c.family)
		rt := s.refreshLocked(&refresh{clientID: clientID, scope: c.scope, subject: c.subject, family: c.family})
		writeToken(w, tokenResponse{AccessToken: access, TokenType: "Bearer", ExpiresIn: expiresIn, RefreshToken: rt, Scope: c.scope})
	}
}

// refresh exchanges a refresh token for a new access token and a new
// refresh token; the old refresh token is then invalid.
func (s *Server) refresh(w http.ResponseWriter, clientID string, form url.Values) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failStatus != 0 {
		http.Error(w, http.StatusText(s.failStatus), s.failStatus)
		return
	}
	if s.failCode != "" {
		writeError(w, http.StatusBadRequest, s.failCode, "refresh failed as the test asked")
		return
	}
	old, ok := s.refreshes[form.Get("refresh_token")]
	switch {
	case !ok:
		writeError(w, http.StatusBadRequest, "invalid_grant", "unknown refresh_token")
		return
	case old.used:
		writeError(w, http.StatusBadRequest, "invalid_grant", "refresh_token already used")
		return
	case old.family.revoked:
		writeError(w, http.StatusBadRequest, "invalid_grant", "refresh_token revoked")
		return
	case old.clientID != clientID:
		writeError(w, http.StatusBadRequest, "invalid_grant", "refresh_token issued to another client")
		return
	}
	scope := old.scope
	if asked, ok := form["scope"]; ok {
		// A refresh may narrow the scope, never widen it (RFC 6749 §6).
		granted := strings.Fields(old.scope)
		for _, sc := range strings.Fields(asked[0]) {
			if !slices.Contains(granted, sc) {
				writeError(w, http.StatusBadRequest, "invalid_scope", "scope "+sc+" was not granted")
				return
			}
		}
		scope = asked[0]
	}
	old.used = true
	access, expiresIn := s.issueLocked(Token{Subject: old.subject, ClientID: clientID, Scope: scope}, old.family)
	rt := s.refreshLocked(&refresh{clientID: clientID, scope: scope, subject: old.subject, family: old.family})
	writeToken(w, tokenResponse{AccessToken: access, TokenType: "Bearer", ExpiresIn: expiresIn, RefreshToken: rt, Scope: scope})
}

// exchange is the RFC 8693 token exchange endpoint: a JWT subject token
// for an access token.
func (s *Server) exchange(w http.ResponseWriter, r *http.Request) {
	form, ok := s.readForm("exchange", w, r)
	if !ok {
		return
	}
	var clientID string
	if s.opts.ClientID != "" {
		id, err := s.client(r, form)
		if err != nil {
			s.refuseClient(w, err)
			return
		}
		clientID = id
	}
	switch {
	case form.Get("grant_type") != grantExchange:
		writeError(w, http.StatusBadRequest, "unsupported_grant_type", "grant_type must be "+grantExchange)
		return
	case form.Get("subject_token") == "":
		writeError(w, http.StatusBadRequest, "invalid_request", "subject_token is missing")
		return
	case form.Get("subject_token_type") != tokenTypeJWT:
		writeError(w, http.StatusBadRequest, "invalid_request", "subject_token_type must be "+tokenTypeJWT)
		return
	case form.Has("requested_token_type") && form.Get("requested_token_type") != tokenTypeAccess:
		writeError(w, http.StatusBadRequest, "invalid_request", "requested_token_type must be "+tokenTypeAccess)
		return
	}
	var subject string
	if s.opts.VerifySubject != nil {
		// Called without the lock: it is the test's code.
		sub, err := s.opts.VerifySubject(form.Get("subject_token"))
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid_grant", "subject_token refused: "+err.Error())
			return
		}
		subject = sub
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.VerifySubject == nil {
		subject = s.subject
	}
	access, expiresIn := s.issueLocked(Token{Subject: subject, ClientID: clientID, Scope: form.Get("scope"), Audience: form.Get("audience")}, nil)
	writeToken(w, tokenResponse{AccessToken: access, IssuedTokenType: tokenTypeAccess, TokenType: "Bearer", ExpiresIn: expiresIn, Scope: form.Get("scope")})
}

// readForm records a request to a POST endpoint and reads its form body,
// answering the error itself when it cannot. Parameters in the URL are
// refused: a client's credentials and codes do not belong in a URL that
// proxies and logs keep.
func (s *Server) readForm(endpoint string, w http.ResponseWriter, r *http.Request) (url.Values, bool) {
	var form url.Values
	var msg string
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch {
	case r.Method != http.MethodPost:
		msg = "the endpoint answers POST"
	case mt != "application/x-www-form-urlencoded":
		msg = "the body must be application/x-www-form-urlencoded"
	case r.URL.RawQuery != "":
		msg = "parameters belong in the body, not the URL"
	default:
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBodyBytes)
		if err := r.ParseForm(); err != nil {
			msg = "the body is not a form: " + err.Error()
		} else {
			form = r.PostForm
		}
	}
	s.record(endpoint, r, form)
	if msg == "" {
		if name, ok := repeated(form); ok {
			msg = "parameter " + name + " given more than once"
		}
	}
	if msg != "" {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, msg, http.StatusMethodNotAllowed)
			return nil, false
		}
		writeError(w, http.StatusBadRequest, "invalid_request", msg)
		return nil, false
	}
	return form, true
}

// client authenticates the client as Options.AuthStyle says and returns
// its id. A client with credentials in both places is refused, one
// method per request (RFC 6749 §2.3), so a test sees a gateway that sends
// its secret where it need not. Without Options.ClientID any client id is
// taken as it comes.
func (s *Server) client(r *http.Request, form url.Values) (string, error) {
	header := r.Header.Get("Authorization")
	var id, secret string
	switch s.opts.AuthStyle {
	case "basic":
		if form.Has("client_secret") {
			return "", errors.New("client_secret in the form: the client authenticates with HTTP Basic")
		}
		if header == "" {
			if s.opts.ClientSecret != "" {
				return "", errors.New("no HTTP Basic credentials")
			}
			id = form.Get("client_id") // a public client names itself
			break
		}
		user, pass, ok := r.BasicAuth()
		if !ok {
			return "", errors.New("the Authorization header is not HTTP Basic")
		}
		// The id and secret are form-encoded inside Basic (RFC 6749 §2.3.1).
		var err1, err2 error
		id, err1 = url.QueryUnescape(user)
		secret, err2 = url.QueryUnescape(pass)
		if err1 != nil || err2 != nil {
			return "", errors.New("the HTTP Basic credentials are not form-encoded")
		}
		if form.Has("client_id") && form.Get("client_id") != id {
			return "", errors.New("client_id in the form differs from HTTP Basic's")
		}
	case "post":
		if header != "" {
			return "", errors.New("an Authorization header: the client authenticates in the form")
		}
		id, secret = form.Get("client_id"), form.Get("client_secret")
	}
	if s.opts.ClientID == "" {
		return id, nil
	}
	// Both compared, whichever is wrong, in constant time.
	idOK := equal(id, s.opts.ClientID)
	secretOK := equal(secret, s.opts.ClientSecret)
	if !idOK || !secretOK {
		return "", errors.New("wrong client_id or client_secret")
	}
	return id, nil
}

// refuseClient answers a client that failed to authenticate, with a
// challenge when it was to use HTTP Basic (RFC 6749 §5.2).
func (s *Server) refuseClient(w http.ResponseWriter, err error) {
	if s.opts.AuthStyle == "basic" {
		w.Header().Set("WWW-Authenticate", `Basic realm="oauthtest"`)
	}
	writeError(w, http.StatusUnauthorized, "invalid_client", err.Error())
}

func writeToken(w http.ResponseWriter, resp tokenResponse) {
	writeJSON(w, http.StatusOK, resp)
}

func writeError(w http.ResponseWriter, status int, code, description string) {
	writeJSON(w, status, oauthError{Error: code, Description: description})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	// Tokens are never cached (RFC 6749 §5.1).
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	w.WriteHeader(status)
	_ = json.MarshalWrite(w, v)
}

// s256 is the PKCE S256 challenge of a verifier (RFC 7636 §4.2).
func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func equal(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
