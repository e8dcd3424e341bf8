package verify

import (
	"context"
	"errors"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/toolgate/toolgate/internal/clock"
)

// A verifier with Audiences takes a token naming any one of them or
// Audience, and no other: the resource indicator of RFC 8707 beside an
// app's own audience.
func TestVerifierAudiences(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	const resource = "https://gw.test/toolgate/mcp"
	for _, tc := range []struct {
		name string
		opts Options
		aud  any
		ok   bool
	}{
		{"the resource alone", Options{Audiences: []string{resource}}, resource, true},
		{"the resource beside the audience", Options{Audience: vAudience, Audiences: []string{resource}}, resource, true},
		{"the audience beside the resource", Options{Audience: vAudience, Audiences: []string{resource}}, vAudience, true},
		{"an array naming the resource", Options{Audience: vAudience, Audiences: []string{resource}}, []string{"other", resource}, true},
		{"another resource", Options{Audience: vAudience, Audiences: []string{resource}}, "https://gw.test/other/mcp", false},
		{"the resource with a slash more", Options{Audiences: []string{resource}}, resource + "/", false},
		{"another resource, audience unset", Options{Audiences: []string{resource}}, "https://evil.test/mcp", false},
		{"no aud", Options{Audiences: []string{resource}}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := NewSecretVerifier(secret, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			v.SetClock(clock.NewManual(vNow))
			c := baseClaims()
			delete(c, "iss")
			if tc.aud == nil {
				delete(c, "aud")
			} else {
				c["aud"] = tc.aud
			}
			_, err = v.Verify(context.Background(), signJWT(t, jwt.SigningMethodHS256, secret, "", c))
			switch {
			case tc.ok && err != nil:
				t.Fatalf("refused: %v", err)
			case !tc.ok && err == nil:
				t.Fatal("accepted")
			case !tc.ok && !errors.Is(err, jwt.ErrTokenInvalidAudience) && !errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
				t.Fatalf("refused for another reason: %v", err)
			}
		})
	}
}
