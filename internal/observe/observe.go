// Package observe is what toolgate tells its operator: the hook points the
// core calls (an Observer), its Prometheus metrics, and the one log line
// of a finished call. It knows no Caddy: the Caddy module hands it Caddy's
// registry and logger.
package observe

import (
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Outcomes of a call, the outcome label of calls_total.
const (
	OutcomeDone           = "done"
	OutcomeError          = "error"
	OutcomeActionRequired = "action_required"
	OutcomeRefused        = "refused"
)

// Refusal reasons, the reason label of refusals_total.
const (
	// RefusedAuth: a caller or page token missing or refused.
	RefusedAuth = "auth"
	// RefusedPolicy: a tool's allow policy said no.
	RefusedPolicy = "policy"
	// RefusedLoopback: without callers, a request not straight from this
	// machine (peer, Host or Origin).
	RefusedLoopback = "loopback"
	// RefusedLimits: a request over a size or pages limit.
	RefusedLimits = "limits"
	// RefusedQuota: a call over one of its quotas (limit …).
	RefusedQuota = "quota"
)

// Approval events, the event label of approvals_total.
const (
	ApprovalAsked    = "asked"
	ApprovalApproved = "approved"
	ApprovalChanged  = "changed"
	ApprovalRejected = "rejected"
	ApprovalTimedOut = "timed_out"
)

var approvalEvents = []string{ApprovalAsked, ApprovalApproved, ApprovalChanged, ApprovalRejected, ApprovalTimedOut}

// Connection events, the event label of connection_events_total: a
// connect card shown (asked), a connection made at the callback (made),
// refused by the user at the service (denied), or failed there (failed);
// a token refreshed (refreshed), or its refresh refused and the token
// dropped (dropped); a token exchanged (exchanged); a connection the user
// removed (removed).
const (
	ConnectionAsked     = "asked"
	ConnectionMade      = "made"
	ConnectionDenied    = "denied"
	ConnectionFailed    = "failed"
	ConnectionRefreshed = "refreshed"
	ConnectionDropped   = "dropped"
	ConnectionExchanged = "exchanged"
	ConnectionRemoved   = "removed"
)

// Client tool events, the event label of client_tool_events_total.
const (
	ClientOffered  = "offered"
	ClientClaimed  = "claimed"
	ClientAnswered = "answered"
	ClientTimedOut = "timed_out"
	// ClientDropped: the caller went away while no page of the thread
	// was open to run the call.
	ClientDropped = "dropped"
)

// Card events, the event label of cards_total.
const (
	CardOpened = "opened"
	CardButton = "button"
	CardSkip   = "skip"
	CardCancel = "cancel"
)

// Ledger outcomes of a call, the ledger field of its log line.
const (
	// LedgerNew: the call was recorded and run here.
	LedgerNew = "new"
	// LedgerReplayed: a repeat of a finished call, answered from the ledger.
	LedgerReplayed = "replayed"
	// LedgerJoined: a repeat that waited for the call in flight.
	LedgerJoined = "joined"
)

// Call is a finished call, as it is counted and logged. It holds no
// user, thread, input or result: only what an operator may read.
type Call struct {
	CallID string
	Tool   string
	// TargetType is the tool's target type as configured: app, url,
	// kazzle (a client tool) or mcp.
	TargetType string
	// MCPServer names an mcp target's upstream MCP server.
	MCPServer string
	// Outcome is one of the Outcome constants.
	Outcome string
	// Status is the call's status: done or action_required.
	Status  string
	IsError bool
	// Duration is the whole call, input checks to answer.
	Duration time.Duration
	// UpstreamStatus is the target's HTTP status; 0 when none answered.
	UpstreamStatus int
	// Ledger is one of the Ledger constants.
	Ledger string
}

// Observer is told what the gateway does. Its methods run on the hot
// path: an implementation must not block, and should not allocate.
type Observer interface {
	// Call: a call ran to its end (or was refused before running).
	Call(c Call)
	// Upstream: one request to a tool's target took d, answer read.
	Upstream(tool string, d time.Duration)
	// Refused: a request was turned away, for one of the Refused reasons.
	Refused(reason string)
	// ClientTool: a client tool event; wait is the time from offer to
	// answer or timeout, zero for offered and claimed.
	ClientTool(event string, wait time.Duration)
	// Card: a card event.
	Card(event string)
	// LedgerOp: one ledger operation (create, get, update, wait) on
	// backend ended with result (ok, not_found, conflict, unavailable,
	// error).
	LedgerOp(backend, op, result string)
	// MCPSession: an MCP session opened (+1) or closed (-1).
	MCPSession(delta int)
	// MCPCall: an MCP tools/call arrived.
	MCPCall()
	// Approval: an approval event (Approval*) of a tool's call.
	Approval(tool, event string)
	// OverLimit: a call of tool was refused by one of its quotas.
	OverLimit(tool string)
	// Connection: an event (Connection*) of a connection's tokens.
	Connection(name, event string)
}

// Nop observes nothing: metrics off.
var Nop Observer = nop{}

type nop struct{}

func (nop) Call(Call)                        {}
func (nop) Upstream(string, time.Duration)   {}
func (nop) Refused(string)                   {}
func (nop) ClientTool(string, time.Duration) {}
func (nop) Card(string)                      {}
func (nop) LedgerOp(string, string, string)  {}
func (nop) MCPSession(int)                   {}
func (nop) MCPCall()                         {}
func (nop) Approval(string, string)          {}
func (nop) OverLimit(string)                 {}
func (nop) Connection(string, string)        {}

// Or is o, or Nop when o is nil.
func Or(o Observer) Observer {
	if o == nil {
		return Nop
	}
	return o
}

// LogCall writes the call's line at info: what an access log says of a
// request, for a tool call. Its fields are fixed: no token, env value,
// input or result ever reaches it.
func LogCall(logger *zap.Logger, c Call) {
	ce := logger.Check(zapcore.InfoLevel, "tool call")
	if ce == nil {
		return
	}
	fields := []zap.Field{
		zap.String("call_id", c.CallID),
		zap.String("tool", c.Tool),
		zap.String("target_type", c.TargetType),
		zap.String("status", c.Status),
		zap.Bool("is_error", c.IsError),
		zap.Duration("duration", c.Duration),
		zap.Int("upstream_status", c.UpstreamStatus),
		zap.String("ledger", c.Ledger),
	}
	if c.MCPServer != "" {
		fields = append(fields, zap.String("mcp_server", c.MCPServer))
	}
	ce.Write(fields...)
}

// LogRefusal writes a refused request's line at info. code is the error
// code the caller was told; neither says who asked.
func LogRefusal(logger *zap.Logger, reason, code string) {
	if ce := logger.Check(zapcore.InfoLevel, "refused"); ce != nil {
		ce.Write(zap.String("reason", reason), zap.String("code", code))
	}
}
