package oauthtest

import (
	"net/http"
	"strings"
)

// resourceAnswer is what the resource endpoint says to a valid token: the
// subject, and the token's last four characters, enough for a test to
// tell which token was sent without the answer carrying it whole.
type resourceAnswer struct {
	Subject string `json:"subject"`
	Token   string `json:"token"`
}

// ResourceHandler is a resource server for the tokens this server issues,
// to mount on the test's own server or at a url target: it answers 200
// {"subject": …, "token": its last 4 characters} to a request with
// "Authorization: Bearer TOKEN" of a valid token, and 401 to any other.
// Every request is recorded (ResourceHits).
func (s *Server) ResourceHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header := r.Header.Get("Authorization")
		scheme, token, _ := strings.Cut(header, " ")
		s.mu.Lock()
		subject, ok := "", false
		if strings.EqualFold(scheme, "Bearer") && token != "" {
			subject, ok = s.validLocked(token)
		}
		s.hits = append(s.hits, Hit{Method: r.Method, Path: r.URL.Path, Authorization: header, Subject: subject})
		s.mu.Unlock()
		if !ok {
			// RFC 6750 §3: no error code for a request without a token.
			challenge := `Bearer realm="oauthtest"`
			if header != "" {
				challenge += `, error="invalid_token"`
			}
			w.Header().Set("WWW-Authenticate", challenge)
			writeJSON(w, http.StatusUnauthorized, oauthError{Error: "invalid_token"})
			return
		}
		writeJSON(w, http.StatusOK, resourceAnswer{Subject: subject, Token: token[max(0, len(token)-4):]})
	})
}

// ResourceHits returns every request the resource handler received, in
// order.
func (s *Server) ResourceHits() []Hit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Hit(nil), s.hits...)
}
