package verify

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// ErrNoBearerToken is why BearerToken finds no token: no Authorization
// header, another scheme, or the scheme alone. RFC 6750 §3.1 answers such
// a request with a challenge and no error code.
var ErrNoBearerToken = errors.New("no bearer token in the Authorization header")

// ErrMalformedAuthorization is why BearerToken refuses a header that
// holds no one clear token: several Authorization headers, or a token
// that is not an RFC 6750 b64token (spaces in it, a comma, a quote…).
var ErrMalformedAuthorization = errors.New("malformed Authorization header")

// BearerToken returns the token of a request's one "Authorization: Bearer
// <token>" header (RFC 6750 §2.1). The scheme is matched in any case
// (RFC 7235 §2.1); the token must be a b64token, which every JWT is.
// Several Authorization headers are refused rather than one picked: a
// proxy on the way may have read another than we would.
func BearerToken(h http.Header) (string, error) {
	vals := h.Values("Authorization")
	if len(vals) == 0 {
		return "", ErrNoBearerToken
	}
	if len(vals) > 1 {
		return "", fmt.Errorf("%w: %d Authorization headers", ErrMalformedAuthorization, len(vals))
	}
	// A field value has no white space around it (RFC 9110 §5.5); one
	// or more spaces part the scheme from its token (RFC 7235 §2.1).
	scheme, token, _ := strings.Cut(strings.Trim(vals[0], " \t"), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", ErrNoBearerToken
	}
	token = strings.TrimLeft(token, " ")
	if token == "" {
		return "", ErrNoBearerToken
	}
	if !isB64Token(token) {
		return "", fmt.Errorf("%w: the bearer token is not one b64token (RFC 6750 §2.1)", ErrMalformedAuthorization)
	}
	return token, nil
}

// isB64Token reports whether s is a b64token:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isB64Token(s string) bool {
	s = strings.TrimRight(s, "=")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '.', c == '_', c == '~', c == '+', c == '/':
		default:
			return false
		}
	}
	return true
}
