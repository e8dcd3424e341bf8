package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/audit"
)

// TestAuditVerifyCommand: `toolgate audit verify` on a trail the audit
// package wrote says the chain holds and exits 0; once a line is edited it
// names the line whose prev no longer matches and exits 1.
func TestAuditVerifyCommand(t *testing.T) {
	bin := toolgateBinary(t)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	tr, err := audit.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []audit.Entry{
		{Event: audit.EventApprovalAsked, CallID: "c1", Tool: "delete_note", User: "u_1", Surface: "api"},
		{Event: audit.EventApprovalDecided, CallID: "c1", Tool: "delete_note", Decision: "approved", By: "u_1", Device: "d_1"},
		{Event: audit.EventCall, CallID: "c1", Tool: "delete_note", Target: "DELETE app:notes /notes/n1", Outcome: "ok", Status: 204, DurationMS: 3.2},
		{Event: audit.EventRefused, CallID: "c2", Tool: "add_note", User: "u_1", Decision: "over_limit", Limit: "20/1h per user"},
	} {
		if err := tr.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}

	out, err := exec.Command(bin, "audit", "verify", path).CombinedOutput()
	if err != nil || string(out) != path+": 4 lines, the chain holds\n" {
		t.Fatalf("intact trail: %v\n%s", err, out)
	}

	// Approved becomes rejected on line 2: line 2 still chains from line
	// 1, and line 3's prev no longer matches it.
	data, _ := os.ReadFile(path)
	edited := bytes.Replace(data, []byte(`"decision":"approved"`), []byte(`"decision":"rejected"`), 1)
	if bytes.Equal(edited, data) {
		t.Fatal("nothing to edit")
	}
	if err := os.WriteFile(path, edited, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(bin, "audit", "verify", path).Output()
	if exit, ok := errors.AsType[*exec.ExitError](err); !ok || exit.ExitCode() != 1 {
		t.Fatalf("edited trail: %v\n%s", err, out)
	}
	if want := fmt.Sprintf("%s: line 3: prev is not the SHA-256 of line 2", path); !strings.HasPrefix(string(out), want) {
		t.Fatalf("edited trail:\n%s\nwant %q…", out, want)
	}

	// A torn last line, recovered by the next Open, is reported.
	if err := os.WriteFile(path, append(data, `{"time":"2026-12-02T1`...), 0o600); err != nil {
		t.Fatal(err)
	}
	if tr, err = audit.Open(path, nil); err != nil {
		t.Fatal(err)
	}
	tr.Close()
	out, err = exec.Command(bin, "audit", "verify", path).CombinedOutput()
	if err != nil || string(out) != path+": 6 lines, the chain holds\n"+path+": line 5 was torn (a write cut short) and recovered: its content is lost\n" {
		t.Fatalf("recovered trail: %v\n%s", err, out)
	}

	out, err = exec.Command(bin, "audit", "verify", filepath.Join(t.TempDir(), "missing.jsonl")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no such file") {
		t.Fatalf("missing file: %v\n%s", err, out)
	}
}
