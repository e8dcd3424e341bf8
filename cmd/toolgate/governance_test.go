package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/redistest"
)

// payee records what reaches the payment endpoint behind the gateway.
type payee struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newPayee(t *testing.T) *payee {
	p := &payee{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		p.bodies = append(p.bodies, r.URL.Path+" "+string(b))
		n := len(p.bodies)
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"content":"paid %d"}`, n)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *payee) sent() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.bodies...)
}

// governedTools are a payment on a url target that asks over 100, one that
// always asks and lapses in a second, and a limited ping, with an audit
// trail.
func governedTools(url, trail, limits string) string {
	schema := "`" + `{"type":"object","properties":{"amount":{"type":"number","maximum":1000},"to":{"type":"string"}},"required":["amount","to"],"additionalProperties":false}` + "`"
	return fmt.Sprintf(`audit %[2]s
		tool pay {
			description "Pay."
			input_schema %[3]s
			target url POST %[1]s/pay
			body `+"`${input}`"+`
			approval "input.amount > 100" {
				title "Approve payment"
				description "Payments over 100 need your approval."
				timeout 24h
			}
		}
		tool pay_soon {
			description "Pay, if approved within a second."
			input_schema %[3]s
			target url POST %[1]s/soon
			approval {
				title "Approve quickly"
				timeout 1s
			}
		}
		tool ping {
			description "Ping."
			input_schema `+"`"+`{"type":"object"}`+"`"+`
			target url GET %[1]s/ping
			%[4]s
		}`, url, trail, schema, limits)
}

func (in *instance) get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(in.base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// TestApprovalSurvivesKill: a payment that needs approval waits with
// nothing sent; the gateway is killed and started again; approving it with
// changes then runs the url target once with the changed input. Reject and
// a lapsed question send nothing, and the audit trail's chain holds until a
// line of it is edited.
func TestApprovalSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	pay := newPayee(t)
	data := t.TempDir()
	trail := filepath.Join(data, "audit.jsonl")
	line := "ledger bolt " + filepath.Join(data, "ledger.db") + "\n\t\t" + governedTools(pay.srv.URL, trail, "")
	in := startInstance(t, line, pay.srv.URL, data)

	if _, a := in.post(t, "/tools/pay", `{"input":{"amount":250,"to":"acme"},"callId":"p1",`+envelope+`}`); a.Status != "action_required" {
		t.Fatalf("a payment over 100: %+v", a)
	}
	if _, a := in.post(t, "/tools/pay", `{"input":{"amount":300,"to":"acme"},"callId":"p2",`+envelope+`}`); a.Status != "action_required" {
		t.Fatalf("a second payment over 100: %+v", a)
	}
	if _, a := in.post(t, "/tools/pay_soon", `{"input":{"amount":5,"to":"acme"},"callId":"p3",`+envelope+`}`); a.Status != "action_required" {
		t.Fatalf("pay_soon: %+v", a)
	}
	if got := pay.sent(); len(got) != 0 {
		t.Fatalf("sent while waiting for approval: %v", got)
	}
	status, raw := in.get(t, "/waiting?user=u_1&install=in_1")
	var waiting struct {
		Calls []struct {
			CallID string `json:"callId"`
			Status string `json:"status"`
		} `json:"calls"`
	}
	if err := json.Unmarshal(raw, &waiting); status != 200 || err != nil || len(waiting.Calls) != 3 || waiting.Calls[0].CallID != "p1" {
		t.Fatalf("GET /waiting: %d %s", status, raw)
	}

	in.kill()
	in = startInstance(t, line, pay.srv.URL, data)
	time.Sleep(1100 * time.Millisecond) // pay_soon lapses

	resume := `{"identity":{"user":"u_1","install":"in_1"},`
	if status, a := in.post(t, "/calls/p1/resume", resume+`"buttonId":"approve","input":{"amount":5000,"to":"acme"}}`); status != 400 {
		t.Fatalf("approving with an input over the maximum: %d %+v", status, a)
	}
	status, a := in.post(t, "/calls/p1/resume", resume+`"buttonId":"approve","input":{"amount":180,"to":"acme"}}`)
	if status != 200 || a.Status != "done" || a.Content != "paid 1" {
		t.Fatalf("approve with changes after the restart: %d %+v", status, a)
	}
	if status, a := in.post(t, "/calls/p1/resume", resume+`"buttonId":"approve","input":{"amount":180,"to":"acme"}}`); status != 200 || a.Content != "paid 1" {
		t.Errorf("the same answer again: %d %+v", status, a)
	}
	if status, a := in.post(t, "/calls/p2/resume", resume+`"buttonId":"reject"}`); status != 200 || !a.IsError || !strings.Contains(a.Content, "rejected") {
		t.Errorf("reject: %d %+v", status, a)
	}
	if status, a := in.post(t, "/calls/p3/resume", resume+`"buttonId":"approve"}`); status != 409 {
		t.Errorf("approving a lapsed question: %d %+v", status, a)
	}
	if _, raw := in.get(t, "/calls/p3?user=u_1&install=in_1"); !strings.Contains(string(raw), "not approved in time") {
		t.Errorf("the lapsed call: %s", raw)
	}
	got := pay.sent()
	if len(got) != 1 || (got[0] != `/pay {"amount":180,"to":"acme"}` && got[0] != `/pay {"to":"acme","amount":180}`) {
		t.Fatalf("the payee got %q; want one payment of 180", got)
	}
	if status, raw := in.get(t, "/waiting?user=u_1&install=in_1"); status != 200 || string(raw) != `{"calls":[]}` {
		t.Errorf("GET /waiting after the answers: %d %s", status, raw)
	}
	in.kill()

	// The trail verifies, and an edited line is named.
	verify := func() (string, error) {
		out, err := exec.Command(toolgateBinary(t), "audit", "verify", trail).CombinedOutput()
		return string(out), err
	}
	if out, err := verify(); err != nil || !strings.Contains(out, "the chain holds") {
		t.Fatalf("toolgate audit verify: %v\n%s", err, out)
	}
	data0, err := os.ReadFile(trail)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data0)
	for _, want := range []string{`"event":"approval_asked"`, `"decision":"changed"`, `"decision":"rejected"`, `"decision":"timed_out"`, `"by":"u_1"`} {
		if !strings.Contains(text, want) {
			t.Errorf("the trail has no %s:\n%s", want, text)
		}
	}
	if strings.Contains(text, "acme") {
		t.Errorf("the trail holds an input value without audit_inputs:\n%s", text)
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	lines[2] = strings.Replace(lines[2], `"u_1"`, `"u_2"`, 1)
	if err := os.WriteFile(trail, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := verify(); err == nil || !strings.Contains(out, "line 4") {
		t.Errorf("an edited line 3: %v\n%s; want the chain broken at line 4, whose prev no longer matches", err, out)
	}
}

// TestQuotaTwoInstancesOnRedis: two instances on one Redis hold one
// window; a refusal is 429 with Retry-After and records nothing; a repeat
// of a recorded call id is answered, not counted; another user, and the
// same user id in another installation, have windows of their own.
func TestQuotaTwoInstancesOnRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	rs := redistest.Start(t)
	pay := newPayee(t)
	data := t.TempDir()
	line := "ledger redis " + rs.Addr + " {\n\t\t\tprefix tg-quota:\n\t\t}\n\t\t" +
		governedTools(pay.srv.URL, filepath.Join(data, "audit-%d.jsonl"), "limit 3/1h per user")
	a := startInstance(t, strings.Replace(line, "%d", "a", 1), pay.srv.URL, t.TempDir())
	b := startInstance(t, strings.Replace(line, "%d", "b", 1), pay.srv.URL, t.TempDir())

	who := func(user, install string) string {
		return `"identity":{"user":"` + user + `","install":"` + install + `"}`
	}
	var wg sync.WaitGroup
	codes := make([]int, 8)
	for i := range codes {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			in := []*instance{a, b}[i%2]
			codes[i], _ = in.post(t, "/tools/ping", `{"input":{},"callId":"q`+strconv.Itoa(i)+`",`+who("u_1", "in_1")+`}`)
		}(i)
	}
	wg.Wait()
	ok, refused := 0, 0
	first := -1
	for i, c := range codes {
		switch c {
		case 200:
			ok++
			if first < 0 {
				first = i
			}
		case 429:
			refused++
		}
	}
	if ok != 3 || refused != 5 {
		t.Fatalf("8 calls on two instances under 3/1h: %d answered, %d refused (%v)", ok, refused, codes)
	}
	if got := len(pay.sent()); got != 3 {
		t.Fatalf("the target ran %d times", got)
	}

	resp, err := http.Post(b.base+"/tools/ping", "application/json", strings.NewReader(`{"input":{},"callId":"q_over",`+who("u_1", "in_1")+`}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode != 429 || retry < 3590 || retry > 3600 || !strings.Contains(string(raw), `"limit":"3/1h per user"`) || !strings.Contains(string(raw), `"code":"over_limit"`) {
		t.Fatalf("over the limit: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), raw)
	}
	if status, raw := a.get(t, "/calls/q_over?user=u_1&install=in_1"); status != 404 {
		t.Errorf("a refused call was recorded: %d %s", status, raw)
	}
	// A repeat of a recorded call is answered from the ledger, uncounted.
	if status, r := b.post(t, "/tools/ping", `{"input":{},"callId":"q`+strconv.Itoa(first)+`",`+who("u_1", "in_1")+`}`); status != 200 || r.IsError {
		t.Errorf("a repeat of a recorded call in a full window: %d %+v", status, r)
	}
	for _, other := range []string{who("u_2", "in_1"), who("u_1", "in_2")} {
		if status, r := a.post(t, "/tools/ping", `{"input":{},`+other+`}`); status != 200 {
			t.Errorf("%s has a window of its own: %d %+v", other, status, r)
		}
	}
	if got := len(pay.sent()); got != 5 {
		t.Errorf("the target ran %d times; want 5", got)
	}

	// An approval asked on A waits on B's list and is approved there, once.
	if _, r := a.post(t, "/tools/pay", `{"input":{"amount":500,"to":"acme"},"callId":"ab1",`+envelope+`}`); r.Status != "action_required" {
		t.Fatalf("pay on A: %+v", r)
	}
	if status, raw := b.get(t, "/waiting?user=u_1&install=in_1"); status != 200 || !strings.Contains(string(raw), `"callId":"ab1"`) {
		t.Errorf("B's waiting list: %d %s", status, raw)
	}
	var wg2 sync.WaitGroup
	for _, in := range []*instance{a, b} {
		wg2.Add(1)
		go func(in *instance) {
			defer wg2.Done()
			in.post(t, "/calls/ab1/resume", `{"buttonId":"approve","identity":{"user":"u_1","install":"in_1"}}`)
		}(in)
	}
	wg2.Wait()
	if got := pay.sent(); len(got) != 6 || !strings.Contains(got[5], `"amount":500`) {
		t.Errorf("approved on both instances at once: the payee got %q; want one payment of 500 more", got)
	}
}
