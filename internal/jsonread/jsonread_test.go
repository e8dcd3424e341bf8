package jsonread

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

func TestOne(t *testing.T) {
	tests := []struct {
		in      string
		want    string // the value read, as text
		wantErr string
	}{
		{in: `{"a":1}`, want: `{"a":1}`},
		{in: " \n\t[1, 2]\r\n ", want: `[1,2]`},
		{in: `"x"`, want: `"x"`},
		{in: `{"a":1} {"b":2}`, wantErr: ErrTrailing.Error()},
		{in: `{"a":1}]`, wantErr: ErrTrailing.Error()},
		{in: `1 x`, wantErr: ErrTrailing.Error()},
		{in: `{"a":`, wantErr: "unexpected EOF"},
		{in: ``, wantErr: "EOF"},
	}
	for _, tt := range tests {
		var got jsontext.Value
		err := One([]byte(tt.in), func(d *jsontext.Decoder) error {
			v, err := d.ReadValue()
			got = v.Clone()
			return err
		})
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("One(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("One(%q) error = %v", tt.in, err)
			continue
		}
		if err := got.Compact(); err != nil || string(got) != tt.want {
			t.Errorf("One(%q) read %s, want %s", tt.in, got, tt.want)
		}
	}
}

// TestOneOptions checks that each call gets its own options, and none are
// left behind in the pool for the next call.
func TestOneOptions(t *testing.T) {
	dup := []byte(`{"a":1,"a":2}`)
	read := func(d *jsontext.Decoder) error { return d.SkipValue() }
	for range 3 {
		if err := One(dup, read, jsontext.AllowDuplicateNames(true)); err != nil {
			t.Fatalf("with AllowDuplicateNames: %v", err)
		}
		if err := One(dup, read); err == nil {
			t.Fatal("without AllowDuplicateNames: no error for a repeated name")
		}
	}
}

// TestOneReadError checks that read's own error comes back unchanged.
func TestOneReadError(t *testing.T) {
	sentinel := errors.New("stop")
	err := One([]byte(`{}`), func(*jsontext.Decoder) error { return sentinel })
	if err != sentinel {
		t.Fatalf("error = %v, want the read error", err)
	}
}

// TestOneReleasesData checks that a pooled decoder does not read the
// previous caller's bytes.
func TestOneReleasesData(t *testing.T) {
	if err := One([]byte(`{"a":1}`), func(d *jsontext.Decoder) error { return d.SkipValue() }); err != nil {
		t.Fatal(err)
	}
	err := One(nil, func(d *jsontext.Decoder) error {
		_, err := d.ReadToken()
		return err
	})
	if err == nil {
		t.Fatal("reading empty input after a pooled use: no error")
	}
}
