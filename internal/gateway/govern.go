package gateway

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/observe"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/quota"
	"github.com/toolgate/toolgate/internal/result"
)

// ApprovalInfo is how a call was approved, which its target learns in
// Kazzle-Tool-Context's "approval" member: who (the user, on which
// device), when, and whether the input was changed.
type ApprovalInfo struct {
	By      string    `json:"by"`
	Device  string    `json:"device,omitempty"`
	At      time.Time `json:"at"`
	Changed bool      `json:"changed"`
}

// limits are the ledger limits a new call counts against: its tool's
// own, then the gateway's over all tools.
func (g *Gateway) limits(tool *manifest.Compiled, call Call) []ledger.Limit {
	n := len(tool.Limits) + len(g.allLimits)
	if n == 0 {
		return nil
	}
	out := make([]ledger.Limit, 0, n)
	for _, r := range tool.Limits {
		out = append(out, r.Limit(tool.Name, call.Identity.User, call.Identity.Install))
	}
	for _, r := range g.allLimits {
		out = append(out, r.Limit(quota.AllTools, call.Identity.User, call.Identity.Install))
	}
	return out
}

// overLimit is the caller's error for a call a quota refused: nothing was
// recorded or sent.
func (g *Gateway) overLimit(tool *manifest.Compiled, call Call, e *ledger.OverLimitError) error {
	g.obs.OverLimit(tool.Name)
	secs := int64(math.Ceil(e.RetryAfter.Seconds()))
	scope := "tool " + tool.Name
	if quota.OverAllTools(e.Limit) {
		scope = "all tools"
	}
	g.auditRefusal(tool, call, "over_limit", e.Limit.Name)
	return g.refused(tool, call, observe.RefusedQuota, &RequestError{
		Code: "over_limit", kind: ErrTooMany, RetryAfter: time.Duration(secs) * time.Second, Limit: e.Limit.Name,
		Msg: fmt.Sprintf("over the limit %s (%s); nothing was run: retry in %d s", e.Limit.Name, scope, secs),
	})
}

// needsApproval evaluates the tool's approval rule for a call. A
// condition that cannot be evaluated asks: the safe side of an approval
// is to ask.
func (g *Gateway) needsApproval(tool *manifest.Compiled, call Call, input any) bool {
	a := tool.Approval
	if a == nil {
		return false
	}
	if a.When == nil {
		return true
	}
	env, err := policyEnv(a.When, tool, call, input)
	if err == nil {
		var ok bool
		if ok, err = a.When.Eval(env); err == nil {
			return ok
		}
	}
	g.logger.Warn("approval condition failed; asking", zap.String("tool", tool.Name), zap.Error(err))
	return true
}

// policyEnv is what an expression of the tool reads for a call.
func policyEnv(p *policy.Allow, tool *manifest.Compiled, call Call, input any) (policy.Env, error) {
	in, err := p.Input(input)
	if err != nil {
		return policy.Env{}, err
	}
	claims := call.Claims
	if claims == nil {
		claims = map[string]any{}
	}
	return policy.Env{
		Claims: claims, User: call.Identity.User, Install: call.Identity.Install, Tool: tool.Name,
		Context: policy.Context{Source: call.Origin.Source, ThreadID: call.Origin.ThreadID},
		Input:   in,
	}, nil
}

// cannotAsk is the answer of a call that needs approval but has no
// person to ask: nothing was recorded or sent.
func (g *Gateway) cannotAsk(tool *manifest.Compiled, call Call, why string) *Answer {
	g.auditRefusal(tool, call, "needs_approval", "")
	return &Answer{CallID: call.CallID, Tool: call.Tool, Status: StatusDone,
		Result: result.Failure("tool %s needs a person's approval (%s), and %s: nothing was sent", tool.Name, tool.Approval.Title, why)}
}

// askApproval pauses a new call on the gateway's approval card, once its
// input is valid (an invalid one ends the call, as it would unasked).
// Nothing is sent.
func (g *Gateway) askApproval(ctx context.Context, tool *manifest.Compiled, call Call, input any, inputErr error, rec *ledger.Call, from ledger.State, start time.Time) *Answer {
	if res, ok := checkInput(tool, input, inputErr); !ok {
		return g.endUnasked(ctx, tool, call, rec, from, res, start)
	}
	now := g.clock.Now()
	in := compactInput(call.Input)
	card := result.Card{
		Type: result.CardType, Title: tool.Approval.Title, Description: tool.Approval.Description,
		Approval: &result.CardApproval{Tool: tool.Name, Input: in, Schema: tool.InputSchema, Expires: now.Add(tool.Approval.Timeout)},
		Elements: []result.Element{
			{Type: "button", ID: result.ButtonApprove, Label: "Approve", Variant: "primary"},
			{Type: "button", ID: result.ButtonReject, Label: "Reject", Variant: "danger"},
		},
	}
	if a := tool.Approval.Assignee; a != nil {
		device, err := g.assignee(a, tool, call, input)
		if err != nil {
			res := result.Failure("tool %s needs approval, and its approver could not be found: %v; nothing was sent", tool.Name, err)
			return g.endUnasked(ctx, tool, call, rec, from, res, start)
		}
		if device != "" {
			card.Assignee = &result.Assignee{ComputerID: device}
		}
	}
	raw, err := json.Marshal(&card, jsonread.Legacy)
	if err != nil {
		// A card of the gateway's own making always encodes.
		panic("gateway: encoding an approval card: " + err.Error())
	}
	out := outcome{card: raw}
	g.logCall(tool, call, out, start)
	g.obs.Card(observe.CardOpened)
	g.obs.Approval(tool.Name, observe.ApprovalAsked)
	rec.State, rec.Card, rec.Updated = ledger.ActionRequired, raw, now
	rec.Approval = &ledger.Approval{Input: in, Expires: card.Approval.Expires}
	g.record(ctx, rec, from)
	g.audit(entryOf(rec, call.Surface, audit.EventApprovalAsked), call.Input)
	return answerOf(rec)
}

// endUnasked ends a call that needed approval but cannot be asked (its
// input is invalid, its approver cannot be found) with res: recorded,
// counted, logged and audited as a call that ran to an error would be.
func (g *Gateway) endUnasked(ctx context.Context, tool *manifest.Compiled, call Call, rec *ledger.Call, from ledger.State, res result.Result, start time.Time) *Answer {
	out := outcome{res: res}
	g.logCall(tool, call, out, start)
	rec.State, rec.Result, rec.Updated = ledger.Done, &res, g.clock.Now()
	g.record(ctx, rec, from)
	g.auditCall(tool, call, out, start)
	return answerOf(rec)
}

// assignee is the device an approval's assignee expression names.
func (g *Gateway) assignee(a *policy.Allow, tool *manifest.Compiled, call Call, input any) (string, error) {
	env, err := policyEnv(a, tool, call, input)
	if err != nil {
		return "", err
	}
	device, err := a.EvalString(env)
	if err != nil {
		return "", err
	}
	if device != "" {
		if err := checkIdentityPart(device); err != nil {
			return "", fmt.Errorf("the device %v", err)
		}
	}
	return device, nil
}

// compactInput is a call's input as the ledger and the card keep it.
func compactInput(raw jsontext.Value) jsontext.Value {
	v := jsontext.Value(slices.Clone(raw))
	if len(v) == 0 || v.Compact() != nil {
		return jsontext.Value("{}")
	}
	return v
}

// notApprovedInTime is the result of an approval that lapsed.
func notApprovedInTime(a *ledger.Approval) result.Result {
	return result.Failure("not approved in time: the approval lapsed at %s; nothing was sent", a.Expires.UTC().Format(time.RFC3339))
}

// pendingApproval reports whether c waits on the gateway's own approval
// question (not an app's card after it).
func pendingApproval(c *ledger.Call) bool {
	return c.State == ledger.ActionRequired && c.Approval != nil && c.Approval.Decision == ""
}

// lapse closes c as not approved in time when its approval question
// lapsed, and returns the call as it now stands.
func (g *Gateway) lapse(ctx context.Context, c *ledger.Call) (*ledger.Call, error) {
	if !pendingApproval(c) || g.clock.Now().Before(c.Approval.Expires) {
		return c, nil
	}
	closed := *c
	a := *c.Approval
	a.Decision, a.At = observe.ApprovalTimedOut, g.clock.Now()
	res := notApprovedInTime(&a)
	closed.State, closed.Result, closed.Approval, closed.Updated = ledger.Done, &res, &a, g.clock.Now()
	cur, err := g.ledger.Update(ctx, &closed, ledger.ActionRequired)
	switch {
	case err == nil:
		g.obs.Approval(c.Tool, observe.ApprovalTimedOut)
		e := entryOf(&closed, "", audit.EventApprovalDecided)
		e.Decision = observe.ApprovalTimedOut
		g.audit(e, nil)
		return &closed, nil
	case errors.Is(err, ledger.ErrConflict):
		return cur, nil
	}
	return nil, g.unavailable(err)
}

// approvalAnswer decides a pending approval, claimed already (its state
// Running): a press of approve runs the tool's target once with the
// approved input; reject, skip and cancel send nothing.
func (g *Gateway) approvalAnswer(ctx context.Context, c *ledger.Call, req ResumeRequest, changed jsontext.Value) outcome {
	a := c.Approval
	switch {
	case req.Action == ActionSkip:
		return outcome{res: result.Result{Content: "The user skipped the approval; nothing was sent."}}
	case req.Action == ActionCancel:
		return outcome{res: result.Failure("The user cancelled the approval; nothing was sent.")}
	case req.ButtonID == result.ButtonReject:
		return outcome{res: result.Failure("The user rejected this call; nothing was sent.")}
	}
	tool, ok := g.Tools().Lookup(c.Tool)
	if !ok {
		return outcome{res: result.Failure("approved, but tool %q is no longer served: nothing was sent", c.Tool)}
	}
	input := a.Input
	if changed != nil {
		input = changed
	}
	decoded, err := decodeInput(input)
	call := Call{
		Tool: c.Tool, CallID: c.CallID, Input: input, Surface: req.Surface,
		Origin:   Origin{Source: c.Source, ThreadID: c.ThreadID},
		Identity: Identity{User: c.User, Install: c.Install}, BaseURL: req.BaseURL,
		approval: &ApprovalInfo{By: a.By, Device: a.Device, At: a.At, Changed: changed != nil},
	}
	return g.rerun(ctx, tool, call, decoded, err)
}

// rerun runs a paused call's tool once a person answered its gateway's
// card (approved it, or connected its connection), logged, audited and
// counted as a call is; its outcome may be another card.
func (g *Gateway) rerun(ctx context.Context, tool *manifest.Compiled, call Call, input any, inputErr error) outcome {
	start := g.clock.Now()
	out := g.execute(ctx, ctx, tool, call, input, inputErr)
	g.logCall(tool, call, out, start)
	g.auditCall(tool, call, out, start)
	if out.card != nil {
		g.obs.Card(observe.CardOpened)
	}
	return out
}

// checkChanges checks the input a person approved with changes against
// the tool's schema: a caller's mistake, told before anything changes.
func (g *Gateway) checkChanges(c *ledger.Call, req ResumeRequest) (jsontext.Value, error) {
	if len(req.Input) == 0 {
		return nil, nil
	}
	if !pendingApproval(c) || req.ButtonID != result.ButtonApprove {
		return nil, badRequest("invalid_resume", `"input" is only for approving a call with changes: the approve button of an approval card`)
	}
	tool, ok := g.Tools().Lookup(c.Tool)
	if !ok {
		return nil, badRequest("invalid_input", "tool %q is no longer served", c.Tool)
	}
	input, err := decodeInput(req.Input)
	if err != nil {
		return nil, badRequest("invalid_input", "the changed input is not valid JSON: %v", err)
	}
	if err := tool.ValidateInput(input); err != nil {
		return nil, badRequest("invalid_input", "the changed input: %v", err)
	}
	in := compactInput(req.Input)
	if sameInput(in, c.Approval.Input) {
		// Unchanged is approved as it is.
		return nil, nil
	}
	return in, nil
}

// sameInput reports whether two inputs are one JSON value, whatever the
// order of their members or their spacing (their canonical digests).
func sameInput(a, b jsontext.Value) bool {
	da, errA := ledger.RawInputDigest(a)
	db, errB := ledger.RawInputDigest(b)
	return errA == nil && errB == nil && da == db
}

// Waiting returns the caller's calls that wait for a person: approval
// questions and apps' cards, oldest first. Questions that lapsed are
// closed and left out.
func (g *Gateway) Waiting(ctx context.Context, who Identity) ([]*Answer, error) {
	if err := CheckIdentity(who); err != nil {
		return nil, err
	}
	calls, err := g.ledger.Waiting(ctx, who.User, who.Install)
	if err != nil {
		return nil, g.unavailable(err)
	}
	out := make([]*Answer, 0, len(calls))
	for _, c := range calls {
		if c.User != who.User || c.Install != who.Install {
			continue
		}
		c, err := g.lapse(ctx, c)
		if err != nil {
			return nil, err
		}
		if c.State == ledger.ActionRequired {
			out = append(out, answerOf(c))
		}
	}
	return out, nil
}
