package caddymodule

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/toolgate/toolgate/internal/apitest"
	"github.com/toolgate/toolgate/internal/audit"
)

// governedConfig is testConfig with an audit trail, a tool that asks
// before it saves, and one limited to two calls an hour per user.
func governedConfig(t *testing.T, upstream, dir string) string {
	extra := `upstream_timeout 300ms
			audit ` + filepath.Join(dir, "audit.jsonl") + `
			tool guarded_save {
				description "Save, once approved."
				input_schema ` + testSchema + `
				target app api POST /items/${input.id}
				body ${input}
				approval "input.id != 'free'" {
					title "Save it?"
					timeout 1h
				}
			}
			tool rare {
				description "Twice an hour."
				input_schema ` + emptySchema + `
				target app api GET /md
				limit 2/1h per user
			}`
	return strings.Replace(testConfig(t, upstream, dir), "upstream_timeout 300ms", extra, 1)
}

// TestDirectiveGovernance: through the directive, an approval waits across
// a config reload and runs once; a quota refuses with 429; the metrics
// count both; the audit trail, shared by the old and the new config, holds
// one chain.
func TestDirectiveGovernance(t *testing.T) {
	rec := apitest.NewRecorder(t)
	dir := dataDir(t)
	cfg := governedConfig(t, rec.URL, dir)
	tc := caddytest.NewTester(t)
	initServer(tc, cfg)
	c := client(tc)

	thread := `"context":{"source":"thread","threadId":"th_g"},` + apitest.Who
	if status, a := c.Call(t, "POST", "/tools/guarded_save", `{"input":{"id":"x1"},"callId":"g1",`+thread+`}`); status != 200 || a.Status != "action_required" {
		t.Fatalf("guarded_save: %d %+v", status, a)
	}
	before := rec.Count()

	// A reload (another config) keeps the question.
	initServer(tc, strings.Replace(cfg, "timeout 1h", "timeout 2h", 1))
	status, a := c.Call(t, "POST", "/calls/g1/resume", `{"buttonId":"approve","input":{"id":"x2"},`+apitest.Who+`}`)
	if status != 200 || a.Status != "done" || a.IsError {
		t.Fatalf("approve with changes after a reload: %d %+v", status, a)
	}
	if n := rec.Count() - before; n != 1 {
		t.Fatalf("the target ran %d times", n)
	}
	if got := rec.Get(t, "/items/"); got.Path != "/items/x2" {
		t.Errorf("the target got %s; want the changed input's /items/x2", got.Path)
	}

	for i, want := range []int{200, 200, 429} {
		if status, _ := c.Call(t, "POST", "/tools/rare", `{"input":{},`+apitest.Who+`}`); status != want {
			t.Errorf("rare call %d: %d, want %d", i+1, status, want)
		}
	}

	_, body := c.Get(t, "http://localhost:2999/metrics")
	for _, re := range []string{
		`(?m)^caddy_toolgate_approvals_total\{event="asked",tool="guarded_save"\} 1$`,
		`(?m)^caddy_toolgate_approvals_total\{event="changed",tool="guarded_save"\} 1$`,
		`(?m)^caddy_toolgate_quota_refusals_total\{tool="rare"\} 1$`,
		`(?m)^caddy_toolgate_refusals_total\{reason="quota"\} 1$`,
	} {
		if !regexp.MustCompile(re).MatchString(body) {
			t.Errorf("/metrics has no %s:\n%s", re, grepLines(body, "caddy_toolgate_"))
		}
	}

	f, err := os.Open(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	report, err := audit.Verify(f)
	if err != nil || report.Lines < 6 {
		t.Errorf("the trail across the reload: %+v, %v", report, err)
	}
}
