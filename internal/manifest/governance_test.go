package manifest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/manifest"
)

func TestCompileApproval(t *testing.T) {
	for _, tc := range []struct {
		name     string
		approval manifest.Approval
		limits   []string
		client   bool
		timeout  time.Duration
		err      string
	}{
		{name: "always", approval: manifest.Approval{Title: "Approve"}, timeout: 24 * time.Hour},
		{name: "condition", approval: manifest.Approval{When: "input.q != ''", Title: "Approve", Timeout: "90m"}, timeout: 90 * time.Minute},
		{name: "days", approval: manifest.Approval{Title: "Approve", Timeout: "2d", Assignee: "claims.approver ?? ''"}, timeout: 48 * time.Hour},
		{name: "no title", approval: manifest.Approval{Title: " "}, err: "approval: a title is required"},
		{name: "bad condition", approval: manifest.Approval{Title: "A", When: "input.q +"}, err: "approval"},
		{name: "condition not a bool", approval: manifest.Approval{Title: "A", When: "'yes'"}, err: "approval"},
		{name: "assignee not a string", approval: manifest.Approval{Title: "A", Assignee: "1 + 1"}, err: "assignee"},
		{name: "timeout too long", approval: manifest.Approval{Title: "A", Timeout: "31d"}, err: "at most 30d"},
		{name: "timeout too long in hours", approval: manifest.Approval{Title: "A", Timeout: "745h"}, err: "at most 30d"},
		{name: "timeout too short", approval: manifest.Approval{Title: "A", Timeout: "10ms"}, err: "at least 1s"},
		{name: "timeout not a duration", approval: manifest.Approval{Title: "A", Timeout: "soon"}, err: "approval timeout"},
		{name: "client tool", approval: manifest.Approval{Title: "A"}, client: true, err: "client tool"},
		{name: "limits", approval: manifest.Approval{Title: "A"}, limits: []string{"20/1h per user", "5 concurrent per user"}, timeout: 24 * time.Hour},
		{name: "bad limit", approval: manifest.Approval{Title: "A"}, limits: []string{"20 an hour"}, err: `limit "20 an hour"`},
		{name: "twin limits", approval: manifest.Approval{Title: "A"}, limits: []string{"20/1h per user", "30/60m per user"}, err: "count the same calls"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := validTool("pay")
			a := tc.approval
			tl.Approval, tl.Limits = &a, tc.limits
			if tc.client {
				tl.Target = dispatch.Spec{Type: "kazzle", Name: "pay"}
			}
			c, err := manifest.CompileTool(tl, testComponents(t))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v; want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Approval == nil || c.Approval.Timeout != tc.timeout || (c.Approval.When == nil) != (a.When == "") || (c.Approval.Assignee == nil) != (a.Assignee == "") {
				t.Errorf("approval = %+v", c.Approval)
			}
			if len(c.Limits) != len(tc.limits) {
				t.Errorf("limits = %+v", c.Limits)
			}
		})
	}
}

// TestManifestGovernance: a JSON manifest spells both members, and a file's
// bad rule is named with the file and the tool.
func TestManifestGovernance(t *testing.T) {
	doc := `{"tools":[{"name":"pay","description":"Pay.","input_schema":{"type":"object","properties":{"amount":{"type":"number"}}},
	 "target":{"type":"url","url":"https://pay.example/pay","method":"POST"},
	 "approval":{"when":"input.amount > 100","title":"Approve payment","timeout":"24h"},
	 "limits":["20/1h per user","1000/1d per install"]}]}`
	f, err := manifest.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	tl := f.Tools[0]
	if tl.Approval == nil || tl.Approval.When != "input.amount > 100" || len(tl.Limits) != 2 {
		t.Fatalf("parsed %+v", tl)
	}
	bad := strings.Replace(doc, `"20/1h per user"`, `"20/1w per user"`, 1)
	f, err = manifest.Parse([]byte(bad))
	if err != nil {
		t.Fatal(err)
	}
	_, err = manifest.Compile([]manifest.Source{{Name: "pay.json", Tools: f.Tools}}, nil)
	if err == nil || !strings.Contains(err.Error(), "pay.json") || !strings.Contains(err.Error(), "pay") || !strings.Contains(err.Error(), "20/1w per user") {
		t.Errorf("err = %v; want the file, the tool and the rule named", err)
	}
}
