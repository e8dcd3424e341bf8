package identity

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// VerifyOptions are the checks a Verifier makes beyond the signature.
type VerifyOptions struct {
	// Issuer, when set, must equal the token's iss.
	Issuer string
	// Audience, when set, must be among the token's aud.
	Audience string
	// Leeway allows for clock skew on exp, nbf and iat.
	Leeway time.Duration
}

// KeySource finds the keys that may have signed a token with the given kid.
type KeySource func(ctx context.Context, kid string) ([]PublicKey, error)

// Verifier checks JWTs: signature by a known key with an algorithm that
// key allows, exp (required), nbf, and the configured iss and aud.
type Verifier struct {
	keys   KeySource
	secret []byte
	opts   VerifyOptions
	algs   []string
	now    func() time.Time
}

// asymmetric are the algorithms a JWKS or public key may allow.
var asymmetric = []string{"EdDSA", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"}

// NewJWKSVerifier verifies against a remote key set.
func NewJWKSVerifier(set *RemoteKeySet, opts VerifyOptions) *Verifier {
	return &Verifier{keys: set.Lookup, opts: opts, algs: asymmetric, now: time.Now}
}

// NewKeyVerifier verifies against one public key; the key's type decides
// the algorithms.
func NewKeyVerifier(pub crypto.PublicKey, opts VerifyOptions) (*Verifier, error) {
	algs, err := AlgsFor(pub)
	if err != nil {
		return nil, err
	}
	k := PublicKey{Key: pub, Algs: algs}
	return &Verifier{
		keys: func(context.Context, string) ([]PublicKey, error) { return []PublicKey{k}, nil },
		opts: opts, algs: algs, now: time.Now,
	}, nil
}

// NewSecretVerifier verifies HMAC tokens (HS256, HS384, HS512) with a
// shared secret of at least 32 bytes.
func NewSecretVerifier(secret []byte, opts VerifyOptions) (*Verifier, error) {
	if len(secret) < 32 {
		return nil, fmt.Errorf("secret of %d bytes: at least 32 are required", len(secret))
	}
	return &Verifier{secret: secret, opts: opts, algs: []string{"HS256", "HS384", "HS512"}, now: time.Now}, nil
}

// SetClock replaces the clock, for tests.
func (v *Verifier) SetClock(now func() time.Time) { v.now = now }

// Verify checks token and returns its claims.
func (v *Verifier) Verify(ctx context.Context, token string) (jwt.MapClaims, error) {
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(v.algs),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(v.opts.Leeway),
		jwt.WithTimeFunc(v.now),
	}
	if v.opts.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(v.opts.Issuer))
	}
	if v.opts.Audience != "" {
		opts = append(opts, jwt.WithAudience(v.opts.Audience))
	}
	claims := jwt.MapClaims{}
	_, err := jwt.NewParser(opts...).ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		alg := t.Method.Alg()
		if v.secret != nil {
			return v.secret, nil
		}
		kid, _ := t.Header["kid"].(string)
		keys, err := v.keys(ctx, kid)
		if err != nil {
			return nil, err
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
			return nil, fmt.Errorf("no key allows %s for kid %q", alg, kid)
		}
		return set, nil
	})
	if err != nil {
		return nil, &VerifyError{err: err}
	}
	return claims, nil
}

// VerifyError says why a token was refused.
type VerifyError struct{ err error }

func (e *VerifyError) Error() string {
	switch {
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

func (e *VerifyError) Unwrap() error { return e.err }
