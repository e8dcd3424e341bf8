package caddymodule

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/identity"
)

// Callers configures how runtime callers authenticate: every call to the
// runtime endpoints carries `Authorization: Bearer <JWT>`, verified against
// exactly one of a JWKS URL, a public key file or a shared secret. The
// call's identity then comes from the token's claims, and the loopback-only
// default no longer applies.
type Callers struct {
	// JWKSURL is where the caller's public keys are published. The set is
	// cached, fetched again every 10 minutes, and on an unknown kid at most
	// once per 30 seconds.
	JWKSURL string `json:"jwks_url,omitempty"`

	// KeyFile is a PEM file with the caller's public key (PKIX "PUBLIC
	// KEY": Ed25519, RSA of at least 2048 bits, or ECDSA).
	KeyFile string `json:"key_file,omitempty"`

	// Secret is a shared HS256/384/512 secret of at least 32 bytes.
	Secret string `json:"secret,omitempty"`

	// Issuer, when set, must equal the token's iss.
	Issuer string `json:"issuer,omitempty"`

	// Audience, when set, must be among the token's aud.
	Audience string `json:"audience,omitempty"`

	// Leeway allows for clock skew on exp and nbf. Default: 30s.
	Leeway caddy.Duration `json:"leeway,omitempty"`

	// UserClaim names the claim holding the user. Default: sub.
	UserClaim string `json:"user_claim,omitempty"`

	// InstallClaim names the claim holding the installation.
	// Default: install.
	InstallClaim string `json:"install_claim,omitempty"`
}

// DefaultLeeway is the clock skew allowed on caller tokens.
const DefaultLeeway = 30 * time.Second

func (c *Callers) verifier() (*identity.Verifier, error) {
	n := 0
	for _, s := range []string{c.JWKSURL, c.KeyFile, c.Secret} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return nil, errors.New("callers: set exactly one of jwks_url, key_file and secret")
	}
	if c.Leeway < 0 {
		return nil, errors.New("callers: leeway must not be negative")
	}
	opts := identity.VerifyOptions{Issuer: c.Issuer, Audience: c.Audience, Leeway: time.Duration(c.Leeway)}
	if c.Leeway == 0 {
		opts.Leeway = DefaultLeeway
	}
	switch {
	case c.JWKSURL != "":
		if !strings.HasPrefix(c.JWKSURL, "https://") && !strings.HasPrefix(c.JWKSURL, "http://") {
			return nil, fmt.Errorf("callers: jwks_url %q must be an http(s) URL", c.JWKSURL)
		}
		return identity.NewJWKSVerifier(identity.NewRemoteKeySet(c.JWKSURL, nil, nil), opts), nil
	case c.KeyFile != "":
		v, err := keyFileVerifier(c.KeyFile, opts)
		if err != nil {
			return nil, fmt.Errorf("callers: %w", err)
		}
		return v, nil
	default:
		v, err := identity.NewSecretVerifier([]byte(c.Secret), opts)
		if err != nil {
			return nil, fmt.Errorf("callers: %w", err)
		}
		return v, nil
	}
}

// keyFileVerifier verifies tokens against the public key in a PEM file
// (PKIX "PUBLIC KEY"); the key's type decides the algorithms.
func keyFileVerifier(path string, opts identity.VerifyOptions) (*identity.Verifier, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("%s holds no PEM \"PUBLIC KEY\" block", path)
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	v, err := identity.NewKeyVerifier(pub, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// caller is who a runtime request comes from.
type caller struct {
	identity gateway.Identity
	claims   map[string]any
	// verified is true when the identity comes from a verified token; the
	// envelope's identity is then ignored.
	verified bool
}

// authenticate checks the runtime caller. Without callers configured, only
// loopback peers are accepted. It writes the refusal itself and reports
// false.
func (h *Handler) authenticate(w http.ResponseWriter, r *http.Request) (caller, bool) {
	if h.verifier == nil {
		if !isLoopback(r.RemoteAddr) {
			writeError(w, http.StatusForbidden, "forbidden", "runtime calls are accepted from loopback addresses only (no callers are configured)")
			return caller{}, false
		}
		return caller{}, true
	}
	token, ok := bearerToken(w, r, "toolgate", "caller")
	if !ok {
		return caller{}, false
	}
	claims, err := h.verifier.Verify(r.Context(), token)
	if err == nil {
		c := caller{claims: claims, verified: true}
		c.identity.User, _ = claims[h.userClaim].(string)
		c.identity.Install, _ = claims[h.installClaim].(string)
		if c.identity.User != "" {
			return c, true
		}
		err = fmt.Errorf("the token has no string %q claim naming the user", h.userClaim)
	}
	w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="toolgate", error="invalid_token", error_description=%q`, err.Error()))
	writeError(w, http.StatusUnauthorized, "invalid_token", err.Error())
	return caller{}, false
}

// bearerToken reads the token of an "Authorization: Bearer" header. Without
// one it answers 401 with a challenge for realm, naming the token required
// (what: "caller", "page").
func bearerToken(w http.ResponseWriter, r *http.Request, realm, what string) (string, bool) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="`+realm+`"`)
		writeError(w, http.StatusUnauthorized, "unauthorized", "a "+what+" token is required: Authorization: Bearer <JWT>")
		return "", false
	}
	return token, true
}
