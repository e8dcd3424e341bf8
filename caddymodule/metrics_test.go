package caddymodule

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/apitest"
	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/manifest"
)

// mdDone matches the count of md calls done in the admin endpoint's
// exposition.
var mdDone = regexp.MustCompile(`(?m)^caddy_toolgate_calls_total\{outcome="done",target_type="app",tool="md"\} (\d+)$`)

// scrape reads md's done calls from the admin API's /metrics, where Caddy
// serves its registry.
func scrape(t *testing.T, tc *caddytest.Tester) int {
	t.Helper()
	resp, body := client(tc).Get(t, "http://localhost:2999/metrics")
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	m := mdDone.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no caddy_toolgate_calls_total for md in /metrics:\n%s", grepLines(body, "caddy_toolgate_calls_total"))
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func grepLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A reload provisions a new handler on a new registry while the old one
// still serves: the load must not fail on registering the same metrics
// again, and the count goes on from where it was.
func TestMetricsSurviveReload(t *testing.T) {
	rec := apitest.NewRecorder(t)
	dir := dataDir(t)
	cfg := testConfig(t, rec.URL, dir)
	tc := caddytest.NewTester(t)
	initServer(tc, cfg)
	call := func() {
		t.Helper()
		if status, a := client(tc).Call(t, "POST", "/tools/md", `{"input":{},`+apitest.Who+`}`); status != 200 || a.Content != "saved" {
			t.Fatalf("md: %d %+v", status, a)
		}
	}
	call()
	first := scrape(t, tc)

	// Another config, so that Caddy reloads rather than keeps the same.
	initServer(tc, strings.Replace(cfg, "upstream_timeout 300ms", "upstream_timeout 310ms", 1))
	call()
	if got := scrape(t, tc); got != first+1 {
		t.Errorf("after a reload and one call: %d, want %d", got, first+1)
	}
}

// metricsHandler is a handler of one tool, md, on upstream.
func metricsHandler(t *testing.T, upstream string, off bool) *Handler {
	return &Handler{
		Components: map[string]*Component{"api": {BaseURL: upstream}},
		Identity:   &Identity{KeyFile: writeKey(t)},
		Ledger:     &Ledger{Backend: "off"},
		Tools: []manifest.Tool{{
			Name: "md", Description: "Markdown.", InputSchema: jsontext.Value(`{"type":"object"}`),
			Target: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/md"},
		}},
		DisableMetrics: off,
	}
}

// Two toolgate handlers in one config register on one registry, and
// `metrics off` registers nothing.
func TestMetricsRegistration(t *testing.T) {
	rec := apitest.NewRecorder(t)
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	for i := range 2 {
		h := metricsHandler(t, rec.URL, false)
		if err := h.provision(ctx, zap.NewNop()); err != nil {
			t.Fatalf("handler %d: %v", i, err)
		}
		defer h.Cleanup()
	}
	if n := toolgateFamilies(t, ctx); n == 0 {
		t.Error("no caddy_toolgate_ metrics on the registry")
	}

	offCtx, cancelOff := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancelOff()
	h := metricsHandler(t, rec.URL, true)
	if err := h.provision(offCtx, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	defer h.Cleanup()
	if n := toolgateFamilies(t, offCtx); n != 0 {
		t.Errorf("metrics off: %d caddy_toolgate_ families registered", n)
	}
}

func toolgateFamilies(t *testing.T, ctx caddy.Context) int {
	t.Helper()
	mfs, err := ctx.GetMetricsRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "caddy_toolgate_") {
			n++
		}
	}
	return n
}
