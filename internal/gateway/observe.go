package gateway

import (
	"time"

	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/observe"
)

// refused counts and logs a call of a served tool turned away before it
// was recorded, for one of observe's Refused reasons.
func (g *Gateway) refused(tool *manifest.Compiled, call Call, reason string, err error) error {
	g.obs.Refused(reason)
	g.obs.Call(observe.Call{CallID: call.CallID, Tool: tool.Name, TargetType: tool.Target.Kind().Name(), MCPServer: tool.Target.Spec.Server, Outcome: observe.OutcomeRefused})
	if re, ok := err.(*RequestError); ok {
		observe.LogRefusal(g.logger, reason, re.Code)
	}
	return err
}

// logCall counts a call that ran here and writes its line.
func (g *Gateway) logCall(tool *manifest.Compiled, call Call, out outcome, start time.Time) {
	c := observe.Call{
		CallID: call.CallID, Tool: call.Tool, TargetType: tool.Target.Kind().Name(), MCPServer: tool.Target.Spec.Server,
		Outcome: observe.OutcomeDone, Status: StatusDone, IsError: out.res.IsError,
		Duration: g.clock.Now().Sub(start), UpstreamStatus: out.upstream, Ledger: observe.LedgerNew,
	}
	switch {
	case out.card != nil:
		c.Outcome, c.Status = observe.OutcomeActionRequired, StatusActionRequired
	case out.res.IsError:
		c.Outcome = observe.OutcomeError
	}
	g.obs.Call(c)
	observe.LogCall(g.logger, c)
}

// logRepeat writes the line of a repeated call id, answered from the
// ledger: joined when the first was still in flight, replayed when it had
// finished. It was not run again, so it is not counted as a call.
func (g *Gateway) logRepeat(tool *manifest.Compiled, existing *ledger.Call, ans *Answer, start time.Time) {
	how := observe.LedgerReplayed
	if existing.State == ledger.Running || existing.State == ledger.AwaitingClient {
		how = observe.LedgerJoined
	}
	c := observe.Call{
		CallID: existing.CallID, Tool: existing.Tool, TargetType: tool.Target.Kind().Name(), MCPServer: tool.Target.Spec.Server,
		Status: ans.Status, IsError: ans.IsError, Duration: g.clock.Now().Sub(start), Ledger: how,
	}
	observe.LogCall(g.logger, c)
}

// cardEvent is the cards_total event of a resume.
func cardEvent(r ResumeRequest) string {
	switch r.Action {
	case ActionSkip:
		return observe.CardSkip
	case ActionCancel:
		return observe.CardCancel
	}
	return observe.CardButton
}
