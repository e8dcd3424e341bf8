package gateway

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/apptools"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/outbound"
	"github.com/toolgate/toolgate/internal/quota"
	"github.com/toolgate/toolgate/internal/result"
)

// govRig serves a payment tool on a url target and on an app component,
// both asking for approval over 100, on a bolt ledger that a test may
// close and open again (a restart), on a manual clock.
type govRig struct {
	t       *testing.T
	app     *hits
	ext     *hits
	set     *manifest.Set
	path    string
	clk     *clock.Manual
	led     ledger.Ledger
	gw      *Gateway
	trail   *memTrail
	me      Identity
	thread  Origin
	limits  []string
	timeout string
}

// memTrail is an Auditor that keeps the entries.
type memTrail struct{ entries []audit.Entry }

func (m *memTrail) Append(e audit.Entry) error {
	m.entries = append(m.entries, e)
	return nil
}

func (m *memTrail) events() []string {
	var out []string
	for _, e := range m.entries {
		out = append(out, e.Event+":"+e.Decision)
	}
	return out
}

const paySchema = `{"type":"object","properties":{"amount":{"type":"number","maximum":10000},"to":{"type":"string"}},"required":["amount","to"],"additionalProperties":false}`

func newGovRig(t *testing.T) *govRig {
	t.Helper()
	rig := &govRig{t: t, me: Identity{User: "u_1", Install: "in_1"}, thread: Origin{Source: SourceThread, ThreadID: "th_1"},
		clk: clock.NewManual(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)), timeout: "1h"}
	answer := func(path string) string { return `{"content":"paid"}` }
	rig.app, rig.ext = newHits(t, answer), newHits(t, answer)
	rig.path = filepath.Join(t.TempDir(), "ledger.db")
	rig.open()
	return rig
}

// open compiles the tools and opens the ledger and a gateway on it.
func (rig *govRig) open() {
	t := rig.t
	comp, err := dispatch.NewComponent("shop", rig.app.srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	approval := &manifest.Approval{When: "input.amount > 100", Title: "Approve payment", Description: "Over 100.", Timeout: rig.timeout}
	tools := []manifest.Tool{
		{Name: "pay", Description: "d", InputSchema: jsontext.Value(paySchema), Approval: approval, Limits: rig.limits,
			Target: dispatch.Spec{Type: "url", Method: "POST", URL: rig.ext.srv.URL + "/pay", Body: jsontext.Value(`"${input}"`)}},
		{Name: "shop_pay", Description: "d", InputSchema: jsontext.Value(paySchema), Approval: approval,
			Target: dispatch.Spec{Type: "app", Component: "shop", Method: "POST", Path: "/pay", Body: jsontext.Value(`"${input}"`)}},
		{Name: "on_phone", Description: "d", InputSchema: jsontext.Value(paySchema),
			Approval: &manifest.Approval{Title: "Approve on your phone", Assignee: `claims.phone ?? ""`},
			Target:   dispatch.Spec{Type: "url", Method: "POST", URL: rig.ext.srv.URL + "/phone", Body: jsontext.Value(`"${input}"`)}},
	}
	rig.set, err = manifest.Compile([]manifest.Source{{Name: "test", Tools: tools}}, map[string]*dispatch.Component{"shop": comp})
	if err != nil {
		t.Fatal(err)
	}
	led, err := ledger.OpenBolt(rig.path, ledger.BoltOptions{Clock: rig.clk})
	if err != nil {
		t.Fatal(err)
	}
	rig.led = led
	t.Cleanup(func() { led.Close() })
	if rig.trail == nil {
		rig.trail = &memTrail{}
	}
	key, _ := identity.GenerateKey()
	rig.gw = New(Config{Tools: rig.set, Issuer: identity.NewIssuer("gw", time.Minute, key), Client: outbound.NewClient(time.Second, 1<<20),
		Ledger: led, Clock: rig.clk, Audit: rig.trail})
}

// restart closes the gateway and its ledger and opens both again.
func (rig *govRig) restart() {
	rig.gw.Close()
	if err := rig.led.Close(); err != nil {
		rig.t.Fatal(err)
	}
	rig.open()
}

func (rig *govRig) invoke(tool, id, input string, origin Origin) (*Answer, error) {
	return rig.gw.Invoke(context.Background(), Call{Tool: tool, CallID: id, Input: jsontext.Value(input), Origin: origin, Identity: rig.me, Surface: SurfaceAPI})
}

func (rig *govRig) resume(id string, req ResumeRequest) (*Answer, error) {
	req.CallID, req.Identity, req.Surface = id, rig.me, SurfaceAPI
	return rig.gw.Resume(context.Background(), req)
}

func approvalCard(t *testing.T, a *Answer) *result.Card {
	t.Helper()
	if a.Status != StatusActionRequired {
		t.Fatalf("status %s (%s); want action_required", a.Status, a.Content)
	}
	c, err := result.ParseCard(a.Card)
	if err != nil {
		t.Fatal(err)
	}
	if c.Approval == nil {
		t.Fatalf("card %s has no approval", a.Card)
	}
	return c
}

func TestApprovalPausesAndApprovesWithChangesAfterRestart(t *testing.T) {
	rig := newGovRig(t)
	small, err := rig.invoke("pay", "call_small", `{"amount":20,"to":"acme"}`, rig.thread)
	if err != nil || small.Status != StatusDone || small.Content != "paid" || rig.ext.count("/pay") != 1 {
		t.Fatalf("a payment under the rule: %+v, %v, sent %d", small, err, rig.ext.count("/pay"))
	}
	a, err := rig.invoke("pay", "call_big", `{"amount":250, "to":"acme"}`, rig.thread)
	if err != nil {
		t.Fatal(err)
	}
	card := approvalCard(t, a)
	if rig.ext.count("/pay") != 1 {
		t.Fatal("a call waiting for approval was sent")
	}
	if card.Title != "Approve payment" || string(card.Approval.Input) != `{"amount":250,"to":"acme"}` || card.Approval.Tool != "pay" ||
		!card.Approval.Expires.Equal(rig.clk.Now().Add(time.Hour)) || string(card.Approval.Schema) != paySchema {
		t.Errorf("card %s", a.Card)
	}
	if _, ok := card.Button(result.ButtonApprove); !ok {
		t.Error("no approve button")
	}
	if _, ok := card.Button(result.ButtonReject); !ok {
		t.Error("no reject button")
	}
	// A repeat of the call answers the same card and sends nothing.
	if again, err := rig.invoke("pay", "call_big", `{"amount":250,"to":"acme"}`, rig.thread); err != nil || again.Status != StatusActionRequired {
		t.Fatalf("repeat: %+v, %v", again, err)
	}

	rig.restart()
	rig.clk.Add(10 * time.Minute)

	// An input the schema refuses is the caller's mistake: nothing changes.
	_, err = rig.resume("call_big", ResumeRequest{ButtonID: result.ButtonApprove, Input: jsontext.Value(`{"amount":99999,"to":"acme"}`)})
	if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "maximum") {
		t.Fatalf("approve with an input over the maximum: %v", err)
	}
	_, err = rig.resume("call_big", ResumeRequest{ButtonID: result.ButtonReject, Input: jsontext.Value(`{"amount":1,"to":"acme"}`)})
	if !errors.Is(err, ErrBadRequest) {
		t.Fatalf("reject with an input: %v", err)
	}
	if st, _ := rig.gw.Status(context.Background(), rig.me, "call_big"); st.Status != StatusActionRequired {
		t.Fatalf("after refused answers the call is %s", st.Status)
	}

	changed := ResumeRequest{ButtonID: result.ButtonApprove, Input: jsontext.Value(`{"to":"acme", "amount":180}`)}
	done, err := rig.resume("call_big", changed)
	if err != nil || done.Status != StatusDone || done.Content != "paid" {
		t.Fatalf("approve with changes: %+v, %v", done, err)
	}
	if n := rig.ext.count("/pay"); n != 2 {
		t.Fatalf("the target was sent %d times in all; want 2 (the small one and the approved one)", n)
	}
	if body := string(rig.ext.last["/pay"].body); body != `{"to":"acme","amount":180}` && body != `{"amount":180,"to":"acme"}` {
		t.Errorf("the target got %s; want the changed input", body)
	}
	// The same answer again gets the recorded result; another is a conflict.
	if again, err := rig.resume("call_big", changed); err != nil || again.Content != "paid" {
		t.Errorf("repeat of the answer: %+v, %v", again, err)
	}
	if _, err := rig.resume("call_big", ResumeRequest{ButtonID: result.ButtonApprove}); !errors.Is(err, ErrConflict) {
		t.Errorf("approving unchanged after approving with changes: %v; want a conflict", err)
	}
	if n := rig.ext.count("/pay"); n != 2 {
		t.Fatalf("sent %d times after repeats; want 2", n)
	}
	c, err := rig.led.Get(context.Background(), ledger.Key("u_1", "in_1", "call_big"))
	if err != nil || c.Approval == nil || c.Approval.Decision != "changed" || c.Approval.By != "u_1" || string(c.Approval.Changed) != `{"to":"acme","amount":180}` {
		t.Errorf("recorded approval %+v, %v", c.Approval, err)
	}
	want := []string{"call:", "approval_asked:", "approval_decided:changed", "call:changed"}
	if got := rig.trail.events(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("audit events %v; want %v", got, want)
	}
}

// The app target learns who approved, when, and that the input changed.
func TestApprovalReachesTheTargetInItsContext(t *testing.T) {
	rig := newGovRig(t)
	if _, err := rig.invoke("shop_pay", "call_1", `{"amount":500,"to":"acme"}`, rig.thread); err != nil {
		t.Fatal(err)
	}
	rig.clk.Add(time.Minute)
	if _, err := rig.resume("call_1", ResumeRequest{ButtonID: result.ButtonApprove, Device: "laptop"}); err != nil {
		t.Fatal(err)
	}
	var ctx struct {
		Source   string        `json:"source"`
		ThreadID string        `json:"threadId"`
		Approval *ApprovalInfo `json:"approval"`
	}
	raw := rig.app.last["/pay"].ctx
	if err := json.Unmarshal([]byte(raw), &ctx); err != nil {
		t.Fatalf("Kazzle-Tool-Context %q: %v", raw, err)
	}
	if ctx.Source != SourceThread || ctx.ThreadID != "th_1" || ctx.Approval == nil || ctx.Approval.By != "u_1" ||
		ctx.Approval.Device != "laptop" || ctx.Approval.Changed || !ctx.Approval.At.Equal(rig.clk.Now()) {
		t.Errorf("Kazzle-Tool-Context %s", raw)
	}
	// The component's own reader takes it.
	r := httptest.NewRequest("POST", "/pay", nil)
	r.Header.Set(apptools.ContextHeader, raw)
	got, err := apptools.ToolContext(r)
	if err != nil || got.Approval == nil || got.Approval.By != "u_1" || got.Approval.Device != "laptop" || !got.Approval.At.Equal(rig.clk.Now()) {
		t.Errorf("apptools.ToolContext(%s) = %+v, %v", raw, got, err)
	}
}

func TestApprovalRejectAndTimeoutSendNothing(t *testing.T) {
	rig := newGovRig(t)
	for _, id := range []string{"call_r", "call_t", "call_s"} {
		if a, err := rig.invoke("pay", id, `{"amount":250,"to":"acme"}`, rig.thread); err != nil || a.Status != StatusActionRequired {
			t.Fatalf("%s: %+v, %v", id, a, err)
		}
	}
	a, err := rig.resume("call_r", ResumeRequest{ButtonID: result.ButtonReject})
	if err != nil || !a.IsError || !strings.Contains(a.Content, "rejected") {
		t.Errorf("reject: %+v, %v", a, err)
	}
	a, err = rig.resume("call_s", ResumeRequest{Action: ActionSkip})
	if err != nil || !strings.Contains(a.Content, "skipped") {
		t.Errorf("skip: %+v, %v", a, err)
	}
	rig.clk.Add(time.Hour + time.Second)
	st, err := rig.gw.Status(context.Background(), rig.me, "call_t")
	if err != nil || st.Status != StatusDone || !st.IsError || !strings.Contains(st.Content, "not approved in time") {
		t.Errorf("after the timeout: %+v, %v", st, err)
	}
	if _, err := rig.resume("call_t", ResumeRequest{ButtonID: result.ButtonApprove}); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "not approved in time") {
		t.Errorf("approving after the timeout: %v", err)
	}
	if n := rig.ext.count(""); n != 0 {
		t.Fatalf("the target was sent %d requests", n)
	}
}

func TestApprovalNeedsAThread(t *testing.T) {
	rig := newGovRig(t)
	a, err := rig.invoke("pay", "call_api", `{"amount":250,"to":"acme"}`, Origin{Source: SourceAPI})
	if err != nil || a.Status != StatusDone || !a.IsError || !strings.Contains(a.Content, "needs a person's approval") || !strings.Contains(a.Content, "nothing was sent") {
		t.Fatalf("api call: %+v, %v", a, err)
	}
	if rig.ext.count("") != 0 {
		t.Fatal("sent")
	}
	if _, err := rig.gw.Status(context.Background(), rig.me, "call_api"); !errors.Is(err, ErrUnknownCall) {
		t.Errorf("an api call that needed approval was recorded: %v", err)
	}
	// The same call in a thread is a new call that asks.
	if a, err := rig.invoke("pay", "call_api", `{"amount":250,"to":"acme"}`, rig.thread); err != nil || a.Status != StatusActionRequired {
		t.Errorf("in a thread: %+v, %v", a, err)
	}
}

// An assignee's device decides; another device may only skip or cancel.
func TestApprovalAssignee(t *testing.T) {
	rig := newGovRig(t)
	call := Call{Tool: "on_phone", CallID: "call_p", Input: jsontext.Value(`{"amount":1,"to":"x"}`), Origin: rig.thread, Identity: rig.me,
		Claims: map[string]any{"phone": "phone-7"}}
	a, err := rig.gw.Invoke(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	card := approvalCard(t, a)
	if card.Assignee == nil || card.Assignee.ComputerID != "phone-7" {
		t.Fatalf("assignee %+v", card.Assignee)
	}
	if _, err := rig.resume("call_p", ResumeRequest{ButtonID: result.ButtonApprove, Device: "laptop"}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("approving from another device: %v", err)
	}
	if rig.ext.count("") != 0 {
		t.Fatal("sent")
	}
	if a, err := rig.resume("call_p", ResumeRequest{ButtonID: result.ButtonApprove, Device: "phone-7"}); err != nil || a.Content != "paid" {
		t.Fatalf("approving on the phone: %+v, %v", a, err)
	}
}

// A handler may not pass its own card off as the gateway's approval.
func TestHandlerCardWithApprovalRefused(t *testing.T) {
	_, err := checkCard(nil, []byte(`{"type":"action_required","title":"t","approval":{"tool":"x","input":{},"schema":{},"expires":"2026-01-01T00:00:00Z"},"elements":[{"type":"button","id":"approve","label":"A"}]}`))
	if err == nil || !strings.Contains(err.Error(), "approval") {
		t.Fatalf("checkCard: %v", err)
	}
}

// TestQuotasInTheGateway: a tool's own limit and one over all tools count
// apart; a refusal is ErrTooMany naming the limit and when to retry,
// records nothing and is audited; a concurrent place is freed when its
// call pauses on an approval card.
func TestQuotasInTheGateway(t *testing.T) {
	rig := newGovRig(t)
	rig.limits = []string{"2/1h per user", "1 concurrent per user"}
	rig.restart()
	rig.gw.allLimits = mustRules(t, "3/1m per install")

	// Two payments over 100 pause one after the other: the paused one
	// holds no concurrent place.
	for _, id := range []string{"c1", "c2"} {
		if a, err := rig.invoke("pay", id, `{"amount":500,"to":"x"}`, rig.thread); err != nil || a.Status != StatusActionRequired {
			t.Fatalf("%s: %+v, %v", id, a, err)
		}
	}
	_, err := rig.invoke("pay", "c3", `{"amount":5,"to":"x"}`, rig.thread)
	var re *RequestError
	if !errors.As(err, &re) || !errors.Is(err, ErrTooMany) || re.Code != "over_limit" || re.Limit != "2/1h per user" ||
		re.RetryAfter != time.Hour || !strings.Contains(err.Error(), "(tool pay)") {
		t.Fatalf("third payment in the hour: %v (%+v)", err, re)
	}
	if _, err := rig.gw.Status(context.Background(), rig.me, "c3"); !errors.Is(err, ErrUnknownCall) {
		t.Errorf("a refused call was recorded: %v", err)
	}
	// The limit over all tools: one more call of any tool, then no more.
	if a, err := rig.invoke("shop_pay", "c4", `{"amount":5,"to":"x"}`, rig.thread); err != nil || a.IsError {
		t.Fatalf("shop_pay: %+v, %v", a, err)
	}
	_, err = rig.invoke("shop_pay", "c5", `{"amount":5,"to":"x"}`, rig.thread)
	if !errors.As(err, &re) || re.Limit != "3/1m per install" || !strings.Contains(err.Error(), "(all tools)") {
		t.Fatalf("over the limit of all tools: %v", err)
	}
	// Another installation's user of the same id is not counted with these.
	other := rig.me
	other.Install = "in_2"
	if _, err := rig.gw.Invoke(context.Background(), Call{Tool: "shop_pay", CallID: "c6", Input: jsontext.Value(`{"amount":5,"to":"x"}`), Origin: rig.thread, Identity: other}); err != nil {
		t.Errorf("another installation: %v", err)
	}
	var limits []string
	for _, e := range rig.trail.entries {
		if e.Event == audit.EventRefused {
			limits = append(limits, e.Decision+" "+e.Limit)
		}
	}
	if strings.Join(limits, ", ") != "over_limit 2/1h per user, over_limit 3/1m per install" {
		t.Errorf("audited refusals: %v", limits)
	}
}

func mustRules(t *testing.T, texts ...string) []quota.Rule {
	t.Helper()
	rules, err := quota.ParseAll(texts)
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

// A device is bounded as identities are: it is stored, audited and sent.
func TestResumeDeviceBounded(t *testing.T) {
	rig := newGovRig(t)
	if _, err := rig.invoke("pay", "call_d", `{"amount":500,"to":"x"}`, rig.thread); err != nil {
		t.Fatal(err)
	}
	for _, device := range []string{strings.Repeat("d", MaxIdentityLen+1), "pho\nne"} {
		if _, err := rig.resume("call_d", ResumeRequest{ButtonID: result.ButtonApprove, Device: device}); !errors.Is(err, ErrBadRequest) {
			t.Errorf("device %.20q: %v", device, err)
		}
	}
	if rig.ext.count("") != 0 {
		t.Fatal("sent")
	}
}
