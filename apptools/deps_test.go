package apptools_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestStandsAlone: a component imports apptools without the gateway's
// machinery. What the gateway alone uses (Caddy, the expression language,
// OpenTelemetry, zap, go-jose, go-redis) must not come with it.
func TestStandsAlone(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	banned := []string{
		"github.com/caddyserver/", "github.com/expr-lang/", "go.opentelemetry.io/",
		"go.uber.org/zap", "github.com/go-jose/", "github.com/redis/",
	}
	deps := strings.Fields(string(out))
	if len(deps) < 20 {
		t.Fatalf("go list -deps listed %d packages: %q", len(deps), deps)
	}
	for _, dep := range deps {
		for _, b := range banned {
			if strings.HasPrefix(dep, b) {
				t.Errorf("apptools pulls in %s", dep)
			}
		}
	}
}
