package gateway

import (
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/manifest"
)

// Auditor keeps the audit trail (audit.Trail). Append must not block for
// long: it runs on the call's path.
type Auditor interface {
	Append(audit.Entry) error
}

// Surfaces: where a call or an answer came from.
const (
	SurfaceAPI    = "api"
	SurfaceMCP    = "mcp"
	SurfaceButton = "button"
)

// audit appends e, stamped now, to the trail; input only when the
// operator asked for inputs (audit_inputs).
func (g *Gateway) audit(e audit.Entry, input jsontext.Value) {
	if g.auditor == nil {
		return
	}
	e.Time = g.clock.Now().UTC()
	if g.auditInputs && len(input) > 0 {
		e.Input = compactInput(input)
	}
	if err := g.auditor.Append(e); err != nil {
		g.logger.Error("appending to the audit trail", zap.String("call_id", e.CallID), zap.Error(err))
	}
}

// entryOf is the audit entry of a recorded call.
func entryOf(c *ledger.Call, surface, event string) audit.Entry {
	return audit.Entry{
		Event: event, CallID: c.CallID, Tool: c.Tool, User: c.User, Install: c.Install,
		Surface: surface, ThreadID: c.ThreadID,
	}
}

// callEntry is the audit entry of a call not (yet) recorded.
func callEntry(call Call, event string) audit.Entry {
	return audit.Entry{
		Event: event, CallID: call.CallID, Tool: call.Tool, User: call.Identity.User, Install: call.Identity.Install,
		Surface: call.Surface, ThreadID: call.Origin.ThreadID,
	}
}

// auditRefusal appends a call turned away: by its policy (forbidden), a
// quota (over_limit, naming it) or an approval it cannot ask for.
func (g *Gateway) auditRefusal(tool *manifest.Compiled, call Call, decision, limit string) {
	if g.auditor == nil {
		return
	}
	e := callEntry(call, audit.EventRefused)
	e.Decision, e.Limit, e.Target = decision, limit, auditTarget(tool.Target)
	g.audit(e, call.Input)
}

// auditCall appends a call that ran to an outcome (or paused on an app's
// card).
func (g *Gateway) auditCall(tool *manifest.Compiled, call Call, out outcome, start time.Time) {
	if g.auditor == nil {
		return
	}
	e := callEntry(call, audit.EventCall)
	e.Target, e.Status = auditTarget(tool.Target), out.upstream
	e.DurationMS = float64(g.clock.Now().Sub(start).Microseconds()) / 1000
	switch {
	case out.card != nil:
		e.Outcome = "action_required"
	case out.res.IsError:
		e.Outcome = "error"
	default:
		e.Outcome = "ok"
	}
	if call.approval != nil {
		e.By, e.Device = call.approval.By, call.approval.Device
		e.Decision = "approved"
		if call.approval.Changed {
			e.Decision = "changed"
		}
	}
	g.audit(e, call.Input)
}

// auditTarget names where a call goes, without what a query may hold.
func auditTarget(t *dispatch.Target) string {
	d := t.Describe()
	if i := strings.IndexAny(d, "?#"); i >= 0 {
		d = d[:i]
	}
	if t.Spec.Method != "" {
		d = t.Spec.Method + " " + d
	}
	return d
}
