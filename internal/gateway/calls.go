package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/observe"
	"github.com/toolgate/toolgate/internal/result"
)

// outcomeUnknown is the result of a call given up while in flight: it may
// or may not have reached its target, and it is never run again.
var outcomeUnknown = result.Failure("outcome unknown: the call was still in flight when the gateway gave up on it (a crash or a timeout); it was not run again")

// answerOf is the answer a recorded call gives now.
func answerOf(c *ledger.Call) *Answer {
	a := &Answer{CallID: c.CallID, Tool: c.Tool, Status: string(c.State)}
	switch c.State {
	case ledger.Done:
		if c.Result != nil {
			a.Result = *c.Result
		}
	case ledger.ActionRequired:
		a.Card = c.Card
	}
	return a
}

// settle answers a recorded call, waiting while it is in flight. A call
// still in flight past its deadline, on the gateway's clock, is closed as
// "outcome unknown".
func (g *Gateway) settle(ctx context.Context, c *ledger.Call) (*Answer, error) {
	for c.State == ledger.Running || c.State == ledger.AwaitingClient {
		wctx, cancel := context.WithTimeout(ctx, c.Deadline.Sub(g.clock.Now()))
		next, err := g.ledger.Wait(wctx, c.Key, c.State)
		cancel()
		switch {
		case err == nil:
			c = next
			continue
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, ledger.ErrUnavailable):
			return nil, g.unavailable(err)
		case wctx.Err() == nil:
			return nil, err
		}
		// The deadline passed: whoever ran the call is gone.
		closed := *c
		closed.State, closed.Result, closed.Updated = ledger.Done, &outcomeUnknown, g.clock.Now()
		cur, err := g.ledger.Update(ctx, &closed, c.State)
		switch {
		case err == nil:
			c = &closed
		case errors.Is(err, ledger.ErrConflict):
			c = cur
		default:
			return nil, g.unavailable(err)
		}
	}
	c, err := g.lapse(ctx, c)
	if err != nil {
		return nil, err
	}
	return answerOf(c), nil
}

// checkCard validates a card by the rules of docs/http-api.md ("Cards:
// pause and resume") and dispatch.CompileCardButton, with owner the target
// whose call answered it, and returns it as compact JSON, written as
// encoding/json wrote it (<, > and & escaped): the ledger keeps those bytes
// and an answer writes them as they are.
func checkCard(owner *dispatch.Target, body []byte) (jsontext.Value, error) {
	card, err := result.ParseCard(body)
	if err != nil {
		return nil, err
	}
	if card.Approval != nil {
		return nil, errors.New(`invalid card: "approval" is the gateway's own approval card's; a handler asks with its own buttons`)
	}
	if card.Connection != nil {
		return nil, errors.New(`invalid card: "connection" is the gateway's own connect card's`)
	}
	for _, b := range card.Elements {
		if b.URL != "" {
			return nil, fmt.Errorf(`invalid card: button %q: "url" is for the gateway's own connect card; a handler's button runs a target or answers its input`, b.ID)
		}
	}
	if err := checkButtons(owner, card); err != nil {
		return nil, err
	}
	return json.Marshal(card, jsonread.Legacy)
}

// checkButtons checks each button target of a card answered by owner.
func checkButtons(owner *dispatch.Target, card *result.Card) error {
	for _, b := range card.Elements {
		if len(b.Target) == 0 {
			continue
		}
		if _, err := dispatch.CompileCardButton(b.Target, owner); err != nil {
			return fmt.Errorf("invalid card: button %q: %v", b.ID, err)
		}
	}
	return nil
}

// cardOwner is the target a recorded call's card may run buttons for:
// the call's tool's, as this gateway serves it now. The card was
// checked when it was recorded, but perhaps by an older build or another
// instance with another config, so it is checked again before a button runs.
func (g *Gateway) cardOwner(c *ledger.Call) (*dispatch.Target, error) {
	tool, ok := g.Tools().Lookup(c.Tool)
	if !ok {
		return nil, fmt.Errorf("tool %q is no longer served", c.Tool)
	}
	if !tool.Target.Kind().AnswersCards() {
		return nil, result.ErrCardNotFromApp
	}
	return tool.Target, nil
}

// Status answers GET /calls/{callId}: the shape the invoke would answer now.
func (g *Gateway) Status(ctx context.Context, who Identity, callID string) (*Answer, error) {
	c, err := g.lookup(ctx, who, callID)
	if err != nil {
		return nil, err
	}
	return answerOf(c), nil
}

func (g *Gateway) lookup(ctx context.Context, who Identity, callID string) (*ledger.Call, error) {
	if err := CheckIdentity(who); err != nil {
		return nil, err
	}
	if err := CheckCallID(callID); err != nil {
		return nil, err
	}
	c, err := g.ledger.Get(ctx, ledger.Key(who.User, who.Install, callID))
	switch {
	case errors.Is(err, ledger.ErrNotKept):
		return nil, &RequestError{Code: "unknown_call", Msg: "calls are not recorded (ledger off)", kind: ErrUnknownCall}
	case errors.Is(err, ledger.ErrNotFound):
		return nil, &RequestError{Code: "unknown_call", Msg: fmt.Sprintf("no call %q for this caller", callID), kind: ErrUnknownCall}
	case err != nil:
		return nil, g.unavailable(err)
	}
	return g.lapse(ctx, c)
}

// Resume actions.
const (
	ActionSkip   = "skip"
	ActionCancel = "cancel"
)

// ResumeRequest answers a card: a pressed button, or skip or cancel.
type ResumeRequest struct {
	CallID   string
	Identity Identity
	ButtonID string
	Action   string
	// Device is the resuming device; with callers, the token's device claim.
	Device string
	// Input is the changed input of an approval approved with changes
	// (ButtonID approve); empty otherwise.
	Input jsontext.Value
	// Surface is where the answer came from (SurfaceAPI, SurfaceMCP).
	Surface string
	// BaseURL is the gateway's own URL as the answer reached it (see
	// Call.BaseURL): a call run again may answer a new connect card.
	BaseURL string

	// denied is the service's refusal a connection's callback ends the
	// call's connect card with.
	denied error
}

// Resume answers a card once. A repeat of the same answer gets the
// recorded result; another answer after the first is a conflict.
func (g *Gateway) Resume(ctx context.Context, req ResumeRequest) (ans *Answer, err error) {
	ctx, span := startResume(ctx, req)
	if span != nil {
		defer func() { endResume(span, ans, err) }()
	}
	if (req.ButtonID == "") == (req.Action == "") {
		return nil, badRequest("invalid_resume", `give either "buttonId" or "action" ("skip" or "cancel")`)
	}
	if req.Action != "" && req.Action != ActionSkip && req.Action != ActionCancel {
		return nil, badRequest("invalid_resume", "action %q is not skip or cancel", req.Action)
	}
	if req.Device != "" {
		// Stored with the answer, written in the trail and sent in
		// Kazzle-Tool-Context: bounded as identities are.
		if err := checkIdentityPart(req.Device); err != nil {
			return nil, badRequest("invalid_resume", "device %v", err)
		}
	}
	c, err := g.lookup(ctx, req.Identity, req.CallID)
	if err != nil {
		return nil, err
	}
	want := ledger.Resume{ButtonID: req.ButtonID, Action: req.Action, Device: req.Device}
	for {
		want.InputDigest = resumeDigest(c, req.Input)
		if c.State != ledger.ActionRequired {
			if c.Approval != nil && c.Approval.Decision == observe.ApprovalTimedOut {
				return nil, &RequestError{Code: "conflict", kind: ErrConflict,
					Msg: fmt.Sprintf("call %q was not approved in time: its approval lapsed at %s", c.CallID, c.Approval.Expires.UTC().Format(time.RFC3339))}
			}
			if c.Resume == nil {
				return nil, &RequestError{Code: "conflict", kind: ErrConflict,
					Msg: fmt.Sprintf("call %q is %s and is not waiting for a person", c.CallID, c.State)}
			}
			if c.Resume.ButtonID != want.ButtonID || c.Resume.Action != want.Action || c.Resume.InputDigest != want.InputDigest {
				return nil, &RequestError{Code: "conflict", kind: ErrConflict,
					Msg: fmt.Sprintf("call %q was already answered (%s)", c.CallID, describeResume(*c.Resume))}
			}
			return g.settle(ctx, c)
		}
		card, err := result.ParseCard(c.Card)
		if err != nil {
			return nil, fmt.Errorf("recorded card of %q: %w", c.CallID, err)
		}
		var button *result.Element
		if want.ButtonID != "" {
			var ok bool
			if button, ok = card.Button(want.ButtonID); !ok {
				return nil, badRequest("unknown_button", "the card has no button %q", want.ButtonID)
			}
			if card.Assignee != nil && want.Device != card.Assignee.ComputerID {
				return nil, &RequestError{Code: "forbidden", kind: ErrForbidden,
					Msg: fmt.Sprintf("continue on %s: only that device may press this card's buttons; others may skip or cancel", card.Assignee.ComputerID)}
			}
		}
		changed, err := g.checkChanges(c, req)
		if err != nil {
			return nil, err
		}
		approving, connecting := pendingApproval(c), pendingConnect(c)
		claimed := *c
		claimed.State, claimed.Resume, claimed.Updated = ledger.Running, &want, g.clock.Now()
		claimed.Owner, claimed.Deadline = g.instance, g.clock.Now().Add(g.inFlightLimit())
		if approving {
			a := *c.Approval
			a.Decision, a.By, a.Device, a.At, a.Changed = decisionOf(req, changed), c.User, req.Device, g.clock.Now().UTC(), changed
			claimed.Approval = &a
		}
		cur, err := g.ledger.Update(ctx, &claimed, ledger.ActionRequired)
		if errors.Is(err, ledger.ErrConflict) {
			c = cur
			continue
		}
		if err != nil {
			return nil, g.unavailable(err)
		}
		g.obs.Card(cardEvent(req))

		// As a call does, a pressed button runs to its end without its caller.
		bg := context.WithoutCancel(ctx)
		if approving || connecting {
			var out outcome
			if approving {
				g.decided(&claimed, req)
				out = g.approvalAnswer(bg, &claimed, req, changed)
			} else {
				out = g.connectAnswer(bg, &claimed, req)
			}
			if out.card != nil {
				claimed.State, claimed.Card, claimed.Connect, claimed.Updated = ledger.ActionRequired, out.card, out.connect, g.clock.Now()
			} else {
				claimed.State, claimed.Result, claimed.Updated = ledger.Done, &out.res, g.clock.Now()
			}
			g.record(bg, &claimed, ledger.Running)
			return answerOf(&claimed), nil
		}
		res := g.answerCard(bg, &claimed, card, button, want.Action)
		claimed.State, claimed.Result, claimed.Updated = ledger.Done, &res, g.clock.Now()
		g.record(bg, &claimed, ledger.Running)
		g.auditResumed(&claimed, req, res)
		return answerOf(&claimed), nil
	}
}

// resumeDigest is the Resume.InputDigest of an answer with input: none
// for no input, or the input the approval already holds.
func resumeDigest(c *ledger.Call, input jsontext.Value) string {
	if len(input) == 0 {
		return ""
	}
	in := compactInput(input)
	if c.Approval != nil && sameInput(in, c.Approval.Input) {
		return ""
	}
	// compactInput's is one JSON value, which RawInputDigest takes.
	d, _ := ledger.RawInputDigest(in)
	return d
}

// decisionOf is how an answer decides an approval.
func decisionOf(req ResumeRequest, changed jsontext.Value) string {
	switch {
	case req.Action != "":
		return req.Action
	case req.ButtonID == result.ButtonApprove && changed != nil:
		return observe.ApprovalChanged
	case req.ButtonID == result.ButtonApprove:
		return observe.ApprovalApproved
	}
	return observe.ApprovalRejected
}

// decided counts and audits an approval's answer.
func (g *Gateway) decided(c *ledger.Call, req ResumeRequest) {
	event := c.Approval.Decision
	if event == ActionSkip || event == ActionCancel {
		event = observe.ApprovalRejected
	}
	g.obs.Approval(c.Tool, event)
	e := entryOf(c, req.Surface, audit.EventApprovalDecided)
	e.Decision, e.By, e.Device = c.Approval.Decision, c.Approval.By, c.Approval.Device
	g.audit(e, c.Approval.Changed)
}

// auditResumed appends an app card's answer and its outcome.
func (g *Gateway) auditResumed(c *ledger.Call, req ResumeRequest, res result.Result) {
	if g.auditor == nil {
		return
	}
	e := entryOf(c, req.Surface, audit.EventResumed)
	e.Decision, e.Device, e.Outcome = describeResume(*c.Resume), req.Device, "ok"
	if res.IsError {
		e.Outcome = "error"
	}
	g.audit(e, nil)
}

func describeResume(r ledger.Resume) string {
	if r.ButtonID != "" {
		return "button " + r.ButtonID
	}
	return r.Action
}

// answerCard computes the tool result of a card's answer.
func (g *Gateway) answerCard(ctx context.Context, c *ledger.Call, card *result.Card, button *result.Element, action string) result.Result {
	switch action {
	case ActionSkip:
		return result.Result{Content: "The user skipped this step."}
	case ActionCancel:
		return result.Failure("The user cancelled this step.")
	}
	owner, err := g.cardOwner(c)
	if err == nil {
		err = checkButtons(owner, card)
	}
	if err != nil {
		return result.Failure("the card cannot be answered: %v", err)
	}
	if len(button.Target) == 0 {
		return result.FromButtonInput(button.Input)
	}
	t, err := dispatch.CompileCardButton(button.Target, owner)
	if err != nil {
		return result.Failure("button %q: %v", button.ID, err)
	}
	input, err := decodeInput(button.Input)
	if err != nil {
		return result.Failure("button %q: its input is not valid JSON: %v", button.ID, err)
	}
	call := Call{
		Tool:     c.Tool,
		Surface:  SurfaceButton,
		CallID:   c.CallID + "/" + button.ID,
		Origin:   Origin{Source: c.Source, ThreadID: c.ThreadID},
		Identity: Identity{User: c.User, Install: c.Install},
	}
	return g.Dispatch(ctx, t, input, call)
}
