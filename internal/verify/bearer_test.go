package verify

import (
	"errors"
	"net/http"
	"testing"
)

func TestBearerToken(t *testing.T) {
	const jwt = "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ1In0.c2lnbmF0dXJl"
	tests := []struct {
		name   string
		values []string // Authorization headers; nil for none
		want   string
		err    error
	}{
		{"JWT", []string{"Bearer " + jwt}, jwt, nil},
		{"scheme in lower case", []string{"bearer " + jwt}, jwt, nil},
		{"scheme in upper case", []string{"BEARER " + jwt}, jwt, nil},
		{"several spaces after the scheme", []string{"Bearer   " + jwt}, jwt, nil},
		{"white space around the value", []string{" \tBearer " + jwt + " \t"}, jwt, nil},
		{"every b64token character", []string{"Bearer aZ09-._~+/=="}, "aZ09-._~+/==", nil},

		{"no header", nil, "", ErrNoBearerToken},
		{"empty header", []string{""}, "", ErrNoBearerToken},
		{"another scheme", []string{"Basic dTpw"}, "", ErrNoBearerToken},
		{"scheme alone", []string{"Bearer"}, "", ErrNoBearerToken},
		{"scheme and a space", []string{"Bearer "}, "", ErrNoBearerToken},
		{"scheme run into the token", []string{"Bearer" + jwt}, "", ErrNoBearerToken},
		{"tab after the scheme", []string{"Bearer\t" + jwt}, "", ErrNoBearerToken},
		{"a longer scheme", []string{"Bearers " + jwt}, "", ErrNoBearerToken},

		{"two headers", []string{"Bearer " + jwt, "Bearer " + jwt}, "", ErrMalformedAuthorization},
		{"two headers, one empty", []string{"Bearer " + jwt, ""}, "", ErrMalformedAuthorization},
		{"two headers of other schemes", []string{"Basic dTpw", "Basic dTpw"}, "", ErrMalformedAuthorization},
		{"space in the token", []string{"Bearer " + jwt + " x"}, "", ErrMalformedAuthorization},
		{"two tokens by a comma", []string{"Bearer " + jwt + ",x"}, "", ErrMalformedAuthorization},
		{"quoted token", []string{`Bearer "` + jwt + `"`}, "", ErrMalformedAuthorization},
		{"auth-param instead of a token", []string{`Bearer token="` + jwt + `"`}, "", ErrMalformedAuthorization},
		{"padding only", []string{"Bearer =="}, "", ErrMalformedAuthorization},
		{"padding inside", []string{"Bearer ab=cd"}, "", ErrMalformedAuthorization},
		{"control character", []string{"Bearer ab\x00cd"}, "", ErrMalformedAuthorization},
		{"non-ASCII", []string{"Bearer jéton"}, "", ErrMalformedAuthorization},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tt.values {
				h.Add("Authorization", v)
			}
			got, err := BearerToken(h)
			if !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
				t.Fatalf("BearerToken = %q, %v; want error %v", got, err, tt.err)
			}
			if got != tt.want {
				t.Errorf("BearerToken = %q, want %q", got, tt.want)
			}
		})
	}
}
