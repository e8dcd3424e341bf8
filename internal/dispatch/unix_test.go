package dispatch_test

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/dispatch"
)

func TestNewComponentUnix(t *testing.T) {
	c, err := dispatch.NewComponent("api", "unix//run/api.sock", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Socket != "/run/api.sock" || c.BaseURL.String() != "http://localhost" || c.Env == nil {
		t.Errorf("got socket %q, base URL %q, env %v; want /run/api.sock, http://localhost, an empty map", c.Socket, c.BaseURL, c.Env)
	}

	for _, tt := range []struct{ addr, wantErr string }{
		{"unix/", "the socket path is empty"},
		{"unix/run/api.sock", "must be absolute"},
		{"unix/./api.sock", "must be absolute"},
		{"unix//run/api.sock?x=1", "no query or fragment"},
		{"unix//run/api.sock#f", "no query or fragment"},
		{"unix//u:p@run/api.sock", "no user info"},
		{"unix//@abstract", "no user info"},
		{"unix//run/a b.sock", "space or a control character"},
		{"unix//run/a\x00.sock", "space or a control character"},
		{"unix//run/../etc/api.sock", "must be clean"},
		{"unix///run/api.sock", "must be clean"},
		{"unix//run/api.sock/", "must be clean"},
		{"unix:/run/api.sock", "absolute http(s)"},
	} {
		_, err := dispatch.NewComponent("api", tt.addr, nil)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), `component "api"`) {
			t.Errorf("NewComponent(%q) = %v, want an error naming the component and containing %q", tt.addr, err, tt.wantErr)
		}
	}
}
