package apptools

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/toolgate/toolgate/internal/verify"
)

// DefaultIssuer is the iss toolgate signs with unless its identity block
// names another.
const DefaultIssuer = "toolgate"

// clockSkew is how far this component's clock may be from toolgate's on
// exp and iat.
const clockSkew = 30 * time.Second

var (
	// ErrNoToken is returned by Verify when the request carries no bearer
	// token: it did not come through an app target.
	ErrNoToken = errors.New("no bearer token in the Authorization header")
	// ErrInvalidToken is wrapped by the error Verify returns when a bearer
	// token is present but refused.
	ErrInvalidToken = errors.New("invalid identity token")
)

// Verifier checks the identity tokens toolgate sends: signed by a key in
// toolgate's JWKS, by toolgate's issuer, for this component, not expired.
type Verifier struct {
	audience string
	tokens   *verify.Verifier
	err      error // what makes the configuration unusable; see Err
}

// NewVerifier returns a verifier of the tokens toolgate signs for the
// component named audience (the name toolgate's configuration gives it,
// which is the token's aud), by issuer (toolgate's identity issuer; empty
// means DefaultIssuer). jwksURL is toolgate's /.well-known/jwks.json.
//
// The key set is fetched on the first call, not here, so a component may
// start before toolgate; it is fetched again as keys age or an unknown key
// id appears.
//
// jwksURL must be https, or http to a loopback host (localhost,
// 127.0.0.0/8, ::1): keys fetched in the clear can be replaced on the
// way, and then any token verifies. With another URL, or no audience, the
// verifier fetches nothing and refuses every token; Err says why, so a
// component checks it when it starts.
func NewVerifier(jwksURL, issuer, audience string) *Verifier {
	if issuer == "" {
		issuer = DefaultIssuer
	}
	var err error
	switch {
	case audience == "":
		// Without an audience any component's token would pass here.
		err = errors.New("apptools: the verifier has no audience: NewVerifier needs this component's name")
	case verify.CheckSecureURL(jwksURL) != nil:
		err = fmt.Errorf("apptools: jwks URL: %w", verify.CheckSecureURL(jwksURL))
	}
	if err != nil {
		return &Verifier{audience: audience, err: err}
	}
	keys := verify.NewRemoteKeySet(jwksURL, nil, nil, nil)
	return &Verifier{
		audience: audience,
		tokens: verify.NewJWKSVerifier(keys, verify.Options{
			Issuer: issuer, Audience: audience, Leeway: clockSkew,
		}),
	}
}

// Err reports what makes the verifier refuse every token: no audience, or
// a JWKS URL that is not https (nor http to a loopback host). It is nil
// for a usable verifier.
func (v *Verifier) Err() error { return v.err }

// Verify checks the request's bearer token and returns the identity it
// names. A request without one gets ErrNoToken; a refused token, an error
// wrapping ErrInvalidToken that says why.
func (v *Verifier) Verify(r *http.Request) (Identity, error) {
	if v.err != nil {
		return Identity{}, v.err
	}
	token, err := bearer(r)
	if err != nil {
		return Identity{}, err
	}
	claims, err := v.tokens.Verify(r.Context(), token)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	user, _ := claims["sub"].(string)
	if user == "" {
		return Identity{}, fmt.Errorf("%w: the token names no user (sub)", ErrInvalidToken)
	}
	install, ok := claims["install"].(string)
	if _, present := claims["install"]; present && !ok {
		return Identity{}, fmt.Errorf("%w: the token's install is not a string", ErrInvalidToken)
	}
	return Identity{User: user, Install: install, Component: v.audience, Claims: claims}, nil
}

// bearer reads the request's bearer token with the gateway's own parser,
// its errors told in this package's terms.
func bearer(r *http.Request) (string, error) {
	token, err := verify.BearerToken(r.Header)
	if errors.Is(err, verify.ErrNoBearerToken) {
		return "", ErrNoToken
	}
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	return token, nil
}

type identityKey struct{}

// Middleware lets through only requests whose token Verify accepts, with
// the Identity in their context for FromContext. Others are answered 401
// with a domain error {"code": "unauthorized", "error": "..."}, which
// toolgate carries into the tool result, and a WWW-Authenticate challenge:
// `Bearer error="invalid_token"` for a refused token, a bare `Bearer` when
// there was none (RFC 6750 §3.1).
func (v *Verifier) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := v.Verify(r)
		if err != nil {
			challenge := `Bearer error="invalid_token"`
			if errors.Is(err, ErrNoToken) {
				challenge = "Bearer"
			}
			w.Header().Set("WWW-Authenticate", challenge)
			WriteError(w, http.StatusUnauthorized, "unauthorized", err.Error())
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, id)))
	})
}

// FromContext returns the Identity Middleware put in a request's context.
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}
