//go:build unix

package caddymodule

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// A provision that fails after the audit trail opened gives the trail
// back: its file's lock is free at once, as a failed config's bolt file
// is (TestProvisionAllOrNothing).
func TestProvisionFailedReleasesAuditTrail(t *testing.T) {
	dir := t.TempDir()
	trail := filepath.Join(dir, "audit.jsonl")
	h, err := provisionedAudit(t, trail, &MCP{MaxSessions: -1}) // httpapi.New refuses it, after the trail opened
	if err == nil || !strings.Contains(err.Error(), "max_sessions") {
		t.Fatalf("provision = %v; want the session limit refused", err)
	}
	if h.trail != nil {
		t.Error("the failed config kept its trail")
	}
	f, err := os.OpenFile(trail, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatalf("the failed config's audit trail is still held: %v", err)
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
}

func provisionedAudit(t *testing.T, trail string, mcp *MCP) (*Handler, error) {
	t.Helper()
	h, ctx := provisionedPagesHandler(t, filepath.Join(t.TempDir(), "ledger.db"), 1, mcp)
	h.Audit = trail
	return h, h.provision(ctx, zap.NewNop())
}
