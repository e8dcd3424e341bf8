package httpapi

import (
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/apitest"
	"github.com/toolgate/toolgate/internal/dispatch"
)

// These are the module's TestAtMostOnce and TestCardFlow (caddymodule's
// ledger_test.go) against the API: a call id runs once, and an
// action-required card pauses a call until it is resumed.

func TestAtMostOnce(t *testing.T) {
	s, rec := startGateway(t)

	before := rec.Count()
	status, a := s.Call(t, "POST", "/tools/md", `{"input":{},"callId":"once_1",`+apitest.Who+`}`)
	if status != 200 || a.Content != "saved" {
		t.Fatalf("first: %d %+v", status, a)
	}
	status, b := s.Call(t, "POST", "/tools/md", `{"input":{},"callId":"once_1",`+apitest.Who+`}`)
	if status != 200 || b.Answer != a.Answer {
		t.Errorf("repeat: %d %+v, want the recorded %+v", status, b, a)
	}
	if n := rec.Count() - before; n != 1 {
		t.Errorf("the target ran %d times for one call id", n)
	}
	if got := rec.Get(t, "/md").Header.Get("Idempotency-Key"); got != dispatch.IdempotencyKey("u_1", "in_1", "once_1") {
		t.Errorf("Idempotency-Key %q", got)
	}
	// Another caller may use the same call id: calls are per caller, and
	// so is the component's key, or its idempotency middleware would
	// answer u_2 with u_1's result.
	if status, _ := s.Call(t, "POST", "/tools/md", `{"input":{},"callId":"once_1","identity":{"user":"u_2"}}`); status != 200 || rec.Count()-before != 2 {
		t.Errorf("another caller's call id: %d, target ran %d times", status, rec.Count()-before)
	}
	if got := rec.Get(t, "/md").Header.Get("Idempotency-Key"); got != dispatch.IdempotencyKey("u_2", "", "once_1") {
		t.Errorf("another caller's Idempotency-Key %q", got)
	}
	if status, _ := s.Call(t, "POST", "/tools/md", `{"input":{},"callId":"once_1","identity":{"user":"u_1","install":"in_2"}}`); status != 200 || rec.Count()-before != 3 {
		t.Errorf("another install's call id: %d, target ran %d times", status, rec.Count()-before)
	}
	if got := rec.Get(t, "/md").Header.Get("Idempotency-Key"); got != dispatch.IdempotencyKey("u_1", "in_2", "once_1") {
		t.Errorf("another install's Idempotency-Key %q", got)
	}
	// The same call id with another input is a misuse.
	status, e := s.Call(t, "POST", "/tools/get_item", `{"input":{"id":"x"},"callId":"once_1",`+apitest.Who+`}`)
	if status != 422 || e.Error == nil || e.Error.Code != "idempotency_key_reuse" {
		t.Errorf("reuse: %d %+v", status, e.Error)
	}

	// Concurrent repeats of one call id: one run, every caller the same answer.
	before = rec.Count()
	var wg sync.WaitGroup
	answers := make([]apitest.CardAnswer, 5)
	for i := range answers {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, answers[i] = s.Call(t, "POST", "/tools/slowok", `{"input":{},"callId":"once_2",`+apitest.Who+`}`)
		}(i)
	}
	wg.Wait()
	for i, a := range answers {
		if a.Content != "slow ok" || a.Status != "done" {
			t.Errorf("caller %d got %+v", i, a)
		}
	}
	if n := rec.Count() - before; n != 1 {
		t.Errorf("concurrent repeats ran the target %d times", n)
	}

	status, g := s.Call(t, "GET", "/calls/once_2?user=u_1&install=in_1", "")
	if status != 200 || g.Content != "slow ok" || g.Status != "done" {
		t.Errorf("GET /calls: %d %+v", status, g)
	}
	if status, _ := s.Call(t, "GET", "/calls/once_2?user=u_9", ""); status != 404 {
		t.Errorf("another caller's call: %d, want 404", status)
	}
}

func TestCardFlow(t *testing.T) {
	s, rec := startGateway(t)

	// On an api call a card is an error result.
	status, a := s.Call(t, "POST", "/tools/card", `{"input":{"kind":"plain"},`+apitest.Who+`}`)
	if status != 200 || !a.IsError || !strings.Contains(a.Content, "api call") {
		t.Errorf("api card: %d %+v", status, a)
	}
	// Invalid cards are error results.
	for kind, want := range map[string]string{"dup": "used twice", "badtarget": `component "nowhere"`} {
		status, a := s.Call(t, "POST", "/tools/card", `{"input":{"kind":"`+kind+`"},`+apitest.ThreadCtx+`,`+apitest.Who+`}`)
		if status != 200 || !a.IsError || !strings.Contains(a.Content, want) {
			t.Errorf("%s card: %d %+v", kind, status, a)
		}
	}

	// A thread call pauses on the card.
	status, a = s.Call(t, "POST", "/tools/card", `{"input":{"kind":"plain"},"callId":"c1",`+apitest.ThreadCtx+`,`+apitest.Who+`}`)
	if status != 200 || a.Status != "action_required" || a.CardObj.Title != "Send the email?" || len(a.CardObj.Elements) != 3 {
		t.Fatalf("card: %d %+v", status, a)
	}
	before := rec.Count()
	if status, r := s.Call(t, "POST", "/tools/card", `{"input":{"kind":"plain"},"callId":"c1",`+apitest.ThreadCtx+`,`+apitest.Who+`}`); status != 200 || r.Status != "action_required" || rec.Count() != before {
		t.Errorf("repeat of a paused call: %d %+v, target hits %d", status, r, rec.Count()-before)
	}
	if status, g := s.Call(t, "GET", "/calls/c1?user=u_1&install=in_1", ""); status != 200 || g.Status != "action_required" || g.CardObj.Title == "" {
		t.Errorf("GET paused: %d %+v", status, g)
	}

	for _, c := range []struct{ body, code string }{
		{`{}`, "invalid_resume"},
		{`{"buttonId":"approve","action":"skip"}`, "invalid_resume"},
		{`{"action":"later"}`, "invalid_resume"},
		{`{"buttonId":"nope"}`, "unknown_button"},
	} {
		body := strings.TrimSuffix(c.body, "}")
		if body != "{" {
			body += ","
		}
		body += `"identity":{"user":"u_1","install":"in_1"}}`
		if status, e := s.Call(t, "POST", "/calls/c1/resume", body); status != 400 || e.Error == nil || e.Error.Code != c.code {
			t.Errorf("resume %s: %d %+v", c.body, status, e.Error)
		}
	}
	if status, _ := s.Call(t, "POST", "/calls/c1/resume", `{"buttonId":"approve","identity":{"user":"u_2"}}`); status != 404 {
		t.Errorf("another caller resuming: %d, want 404", status)
	}

	// A button without a target: its input is the result.
	status, r := s.Call(t, "POST", "/calls/c1/resume", `{"buttonId":"approve","identity":{"user":"u_1","install":"in_1"}}`)
	if status != 200 || r.Status != "done" || r.IsError || r.Content != "approved" || r.Markdown != "**approved**" {
		t.Fatalf("approve: %d %+v", status, r)
	}
	if status, again := s.Call(t, "POST", "/calls/c1/resume", `{"buttonId":"approve","identity":{"user":"u_1","install":"in_1"}}`); status != 200 || again.Answer != r.Answer {
		t.Errorf("second identical resume: %d %+v", status, again)
	}
	if status, e := s.Call(t, "POST", "/calls/c1/resume", `{"buttonId":"reject","identity":{"user":"u_1","install":"in_1"}}`); status != 409 || e.Error == nil || e.Error.Code != "conflict" {
		t.Errorf("another button after the first: %d %+v", status, e.Error)
	}
	if status, g := s.Call(t, "GET", "/calls/c1?user=u_1&install=in_1", ""); status != 200 || g.Answer != r.Answer {
		t.Errorf("GET resumed: %d %+v", status, g)
	}

	// An input without content is its compact JSON text.
	s.Call(t, "POST", "/tools/card", `{"input":{"kind":"plain"},"callId":"c2",`+apitest.ThreadCtx+`,`+apitest.Who+`}`)
	if _, r := s.Call(t, "POST", "/calls/c2/resume", `{"buttonId":"reject","identity":{"user":"u_1","install":"in_1"}}`); r.Content != `{"reason":"no","n":1}` || r.IsError {
		t.Errorf("reject: %+v", r)
	}

	// A button with a target runs it with the call's identity and thread.
	s.Call(t, "POST", "/tools/card", `{"input":{"kind":"plain"},"callId":"c3",`+apitest.ThreadCtx+`,`+apitest.Who+`}`)
	status, r = s.Call(t, "POST", "/calls/c3/resume", `{"buttonId":"run","identity":{"user":"u_1","install":"in_1"}}`)
	if status != 200 || r.IsError || r.Content != "ok" {
		t.Fatalf("run: %d %+v", status, r)
	}
	got := rec.Get(t, "/items/")
	if got.Method != "POST" || got.Path != "/items/z9" || string(got.Body) != `{"id":"z9"}` ||
		got.Header.Get("Kazzle-Tool-Context") != `{"source":"thread","threadId":"th_1"}` || got.Header.Get("Idempotency-Key") != dispatch.IdempotencyKey("u_1", "in_1", "c3/run") {
		t.Errorf("button target sent %s %s %s %v", got.Method, got.Path, got.Body, got.Header)
	}
	if claims := s.VerifyWithJWKS(t, strings.TrimPrefix(got.Header.Get("Authorization"), "Bearer ")); claims["sub"] != "u_1" || claims["install"] != "in_1" {
		t.Errorf("button target identity %v", claims)
	}

	// Skip and cancel.
	s.Call(t, "POST", "/tools/card", `{"input":{"kind":"plain"},"callId":"c4",`+apitest.ThreadCtx+`,`+apitest.Who+`}`)
	if _, r := s.Call(t, "POST", "/calls/c4/resume", `{"action":"skip","identity":{"user":"u_1","install":"in_1"}}`); r.IsError || !strings.Contains(r.Content, "skipped") {
		t.Errorf("skip: %+v", r)
	}
	s.Call(t, "POST", "/tools/card", `{"input":{"kind":"plain"},"callId":"c5",`+apitest.ThreadCtx+`,`+apitest.Who+`}`)
	if _, r := s.Call(t, "POST", "/calls/c5/resume", `{"action":"cancel","identity":{"user":"u_1","install":"in_1"}}`); !r.IsError || !strings.Contains(r.Content, "cancelled") {
		t.Errorf("cancel: %+v", r)
	}

	// A card for one device: others may not press, but may skip.
	s.Call(t, "POST", "/tools/card", `{"input":{"kind":"device"},"callId":"c6",`+apitest.ThreadCtx+`,`+apitest.Who+`}`)
	for _, device := range []string{``, `,"device":"pc-1"`} {
		if status, e := s.Call(t, "POST", "/calls/c6/resume", `{"buttonId":"scan","identity":{"user":"u_1","install":"in_1"}`+device+`}`); status != 403 || e.Error == nil || !strings.Contains(e.Error.Message, "continue on pc-7") {
			t.Errorf("press from %q: %d %+v", device, status, e.Error)
		}
	}
	if _, r := s.Call(t, "POST", "/calls/c6/resume", `{"buttonId":"scan","device":"pc-7","identity":{"user":"u_1","install":"in_1"}}`); r.Content != "scanned" {
		t.Errorf("press from pc-7: %+v", r)
	}
	s.Call(t, "POST", "/tools/card", `{"input":{"kind":"device"},"callId":"c7",`+apitest.ThreadCtx+`,`+apitest.Who+`}`)
	if _, r := s.Call(t, "POST", "/calls/c7/resume", `{"action":"skip","device":"pc-1","identity":{"user":"u_1","install":"in_1"}}`); r.IsError || !strings.Contains(r.Content, "skipped") {
		t.Errorf("skip from another device: %+v", r)
	}
}
