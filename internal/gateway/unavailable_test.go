package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/ledger"
)

// downLedger fails every operation the way the bolt ledger does: its error
// names the file and the call's key, which holds the user.
type downLedger struct{}

const downPath = "/var/lib/caddy/toolgate/ledger.db"

func (downLedger) fail(doing, key string) error {
	return fmt.Errorf("%w: %s call %q in %s: %w", ledger.ErrUnavailable, doing, key, downPath, io.ErrUnexpectedEOF)
}
func (l downLedger) Create(_ context.Context, c *ledger.Call) (*ledger.Call, bool, error) {
	return nil, false, l.fail("creating", c.Key)
}
func (l downLedger) Get(_ context.Context, key string) (*ledger.Call, error) {
	return nil, l.fail("reading", key)
}
func (l downLedger) Update(_ context.Context, c *ledger.Call, _ ledger.State) (*ledger.Call, error) {
	return nil, l.fail("updating", c.Key)
}
func (l downLedger) Wait(_ context.Context, key string, _ ledger.State) (*ledger.Call, error) {
	return nil, l.fail("waiting for", key)
}
func (l downLedger) Spend(_ context.Context, id string, _ time.Time) (bool, error) {
	return false, l.fail("spending", id)
}
func (l downLedger) Waiting(context.Context, string, string) ([]*ledger.Call, error) {
	return nil, l.fail("listing", "")
}
func (downLedger) Close() error  { return nil }
func (downLedger) Records() bool { return true }

// A 503 never tells a path or a user: the ledger's error is logged, the
// caller gets a fixed message; and nothing runs.
func TestUnavailableMessage(t *testing.T) {
	gw, ch := newGateway(t, tool("app", dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x"}))
	core, logs := observer.New(zap.InfoLevel)
	gw.ledger, gw.logger = downLedger{}, zap.New(core)
	me := Identity{User: "user_secret_name", Install: "in_1"}
	ctx := context.Background()

	_, invokeErr := gw.Invoke(ctx, Call{Tool: "app", CallID: "c1", Identity: me})
	_, statusErr := gw.Status(ctx, me, "c1")
	_, resumeErr := gw.Resume(ctx, ResumeRequest{CallID: "c1", Identity: me, Action: "skip"})
	for name, err := range map[string]error{"invoke": invokeErr, "status": statusErr, "resume": resumeErr} {
		if !errors.Is(err, ErrUnavailable) || err.Error() != "the call ledger is unavailable, nothing was run" {
			t.Errorf("%s: %v, want ErrUnavailable (503) with the fixed message", name, err)
		}
	}
	if n := len(ch); n != 0 {
		t.Errorf("the upstream was called %d times", n)
	}
	logged := logs.FilterMessage("the call ledger is unavailable").All()
	if len(logged) != 3 {
		t.Fatalf("%d ledger failures logged, want 3", len(logged))
	}
	if detail := logged[0].ContextMap()["error"].(string); !strings.Contains(detail, downPath) || !strings.Contains(detail, "user_secret_name") {
		t.Errorf("logged %q, want the ledger's detail", detail)
	}
}
