package verify

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/toolgate/toolgate/internal/clock"
)

// Options are the checks a Verifier makes beyond the signature.
type Options struct {
	// Issuer, when set, must equal the token's iss.
	Issuer string
	// Audience, when set, must be among the token's aud.
	Audience string
	// Audiences, when set, are accepted beside Audience: the token's aud
	// must name one of them or Audience. A resource server known by two
	// names (an app's own audience, and the resource indicator an
	// authorization server puts in aud, RFC 8707) takes either.
	Audiences []string
	// Leeway allows for clock skew on exp, nbf and iat.
	Leeway time.Duration
	// RefuseAudiences are audiences a token must not name, even beside
	// Audience: those of the other kinds of token a gateway accepts, so
	// that one kind is never taken for another.
	RefuseAudiences []string
}

// KeySource finds the keys that may have signed a token with the given kid.
type KeySource func(ctx context.Context, kid string) ([]PublicKey, error)

// Verifier checks JWTs: signature by a known key with an algorithm that
// key allows, exp (required), nbf, and the configured iss and aud.
type Verifier struct {
	keys   KeySource
	secret []byte
	opts   Options
	algs   []string
	clock  clock.Clock
	// parser checks what opts, algs and clock say, built once (compile):
	// a jwt.Parser is read only once made.
	parser *jwt.Parser
}

// asymmetric are the algorithms a JWKS or public key may allow.
var asymmetric = []string{"EdDSA", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"}

// NewJWKSVerifier verifies against a remote key set.
func NewJWKSVerifier(set *RemoteKeySet, opts Options) *Verifier {
	return (&Verifier{keys: set.Lookup, opts: opts, algs: asymmetric, clock: clock.Real}).compile()
}

// NewKeyVerifier verifies against one public key; the key's type decides
// the algorithms.
func NewKeyVerifier(pub crypto.PublicKey, opts Options) (*Verifier, error) {
	algs, err := AlgsFor(pub)
	if err != nil {
		return nil, err
	}
	k := PublicKey{Key: pub, Algs: algs}
	return (&Verifier{
		keys: func(context.Context, string) ([]PublicKey, error) { return []PublicKey{k}, nil },
		opts: opts, algs: algs, clock: clock.Real,
	}).compile(), nil
}

// NewSecretVerifier verifies HMAC tokens (HS256, HS384, HS512) with a
// shared secret of at least 32 bytes.
func NewSecretVerifier(secret []byte, opts Options) (*Verifier, error) {
	if len(secret) < 32 {
		return nil, fmt.Errorf("secret of %d bytes: at least 32 are required", len(secret))
	}
	return (&Verifier{secret: secret, opts: opts, algs: []string{"HS256", "HS384", "HS512"}, clock: clock.Real}).compile(), nil
}

// SetClock replaces the clock, for tests.
func (v *Verifier) SetClock(c clock.Clock) {
	v.clock = clock.Or(c)
	v.compile()
}

// compile builds the parser of v's options, algorithms and clock, once
// rather than for each token.
func (v *Verifier) compile() *Verifier {
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(v.algs),
		// One spelling per token: no spare base64 bits, no padding.
		jwt.WithStrictDecoding(),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(v.opts.Leeway),
		jwt.WithTimeFunc(v.clock.Now),
	}
	if v.opts.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(v.opts.Issuer))
	}
	// The token must name one of the audiences; none configured: any.
	auds := v.opts.Audiences
	if v.opts.Audience != "" {
		auds = append([]string{v.opts.Audience}, auds...)
	}
	if len(auds) > 0 {
		opts = append(opts, jwt.WithAudience(auds...))
	}
	v.parser = jwt.NewParser(opts...)
	return v
}

// Verify checks token and returns its claims.
func (v *Verifier) Verify(ctx context.Context, token string) (jwt.MapClaims, error) {
	claims := jwt.MapClaims{}
	_, err := v.parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		alg := t.Method.Alg()
		if v.secret != nil {
			return v.secret, nil
		}
		kid, _ := t.Header["kid"].(string)
		keys, err := v.keys(ctx, kid)
		if err != nil {
			return nil, &keyError{err}
		}
		var set jwt.VerificationKeySet
		for _, k := range keys {
			for _, a := range k.Algs {
				if a == alg {
					set.Keys = append(set.Keys, k.Key)
					break
				}
			}
		}
		if len(set.Keys) == 0 {
			return nil, &keyError{fmt.Errorf("%w: none allows %s", ErrUnknownKey, alg)}
		}
		return set, nil
	})
	if err == nil {
		err = refuseAudiences(claims, v.opts.RefuseAudiences)
	}
	if err != nil {
		return nil, &Error{err: err}
	}
	return claims, nil
}

func refuseAudiences(claims jwt.MapClaims, refused []string) error {
	if len(refused) == 0 {
		return nil
	}
	auds, err := claims.GetAudience()
	if err != nil {
		return err
	}
	for _, a := range auds {
		if slices.Contains(refused, a) {
			return fmt.Errorf("%w: %q is another kind of token's", jwt.ErrTokenInvalidAudience, a)
		}
	}
	return nil
}

// keyError is a failure to find the keys of a token. Its cause may name
// the key set's URL or what the issuer answered: it is logged where it
// happens, never told to the token's sender.
type keyError struct{ err error }

func (e *keyError) Error() string { return e.err.Error() }
func (e *keyError) Unwrap() error { return e.err }

// Error says why a token was refused.
type Error struct{ err error }

func (e *Error) Error() string {
	var ke *keyError
	switch {
	case errors.Is(e.err, ErrUnknownKey):
		return "the token's key is not known"
	case errors.As(e.err, &ke):
		return "the token could not be verified"
	case errors.Is(e.err, jwt.ErrTokenExpired):
		return "the token has expired"
	case errors.Is(e.err, jwt.ErrTokenNotValidYet), errors.Is(e.err, jwt.ErrTokenUsedBeforeIssued):
		return "the token is not valid yet"
	case errors.Is(e.err, jwt.ErrTokenInvalidIssuer):
		return "the token's issuer is not accepted"
	case errors.Is(e.err, jwt.ErrTokenInvalidAudience):
		return "the token's audience is not accepted"
	case errors.Is(e.err, jwt.ErrTokenRequiredClaimMissing):
		// exp is always required, iss and aud when configured: name the
		// one missing (jwt writes "<claim> claim is required").
		for _, c := range []string{"exp", "iss", "aud"} {
			if strings.Contains(e.err.Error(), c+" claim is required") {
				return "the token lacks a required claim (" + c + ")"
			}
		}
		return "the token lacks a required claim"
	case errors.Is(e.err, jwt.ErrTokenMalformed):
		return "the token is malformed"
	case errors.Is(e.err, jwt.ErrTokenSignatureInvalid):
		return "the token's signature does not verify"
	}
	return "the token is not accepted: " + e.err.Error()
}

func (e *Error) Unwrap() error { return e.err }
