package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/apptools"
	"github.com/toolgate/toolgate/internal/apitest"
	"github.com/toolgate/toolgate/internal/redistest"
)

// These tests run the real binary: several toolgate processes on one Redis,
// and a bolt ledger that survives kill -9.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func toolgateBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "toolgate-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "toolgate")
		// The README's command, from the checkout's root.
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/toolgate")
		cmd.Dir = "../.."
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// upstream answers the tools of these tests and counts what it runs.
type upstream struct {
	srv     *httptest.Server
	hits    atomic.Int64
	started chan string // Idempotency-Key of each /hold call as it arrives
	release chan struct{}
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{started: make(chan string, 16), release: make(chan struct{})}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/slow":
			time.Sleep(400 * time.Millisecond)
			fmt.Fprintf(w, `{"content":"slow done %d"}`, u.hits.Load())
		case "/hold":
			u.started <- r.Header.Get("Idempotency-Key")
			select {
			case <-u.release:
			case <-r.Context().Done():
				return
			}
			fmt.Fprint(w, `{"content":"held"}`)
		case "/card":
			fmt.Fprint(w, `{"type":"action_required","title":"Go on?","elements":[{"type":"button","id":"yes","label":"Yes","input":{"content":"yes pressed"}}]}`)
		default:
			fmt.Fprintf(w, `{"content":"fast %d"}`, u.hits.Load())
		}
	}))
	t.Cleanup(func() {
		select {
		case <-u.release:
		default:
			close(u.release)
		}
		u.srv.Close()
	})
	return u
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// instance is one toolgate process.
type instance struct {
	base   string
	config string // its Caddyfile
	env    []string
	cmd    *exec.Cmd
	log    *bytes.Buffer
}

func startInstance(t *testing.T, ledgerLine, upstreamURL, dataDir string) *instance {
	t.Helper()
	port := freePort(t)
	cfg := fmt.Sprintf(`{
	admin off
	storage file_system %[4]s
}
http://127.0.0.1:%[1]d {
	bind 127.0.0.1
	toolgate {
		component api %[2]s
		%[3]s
		upstream_timeout 10s
		tool slow {
			description "Slow."
			input_schema `+"`"+`{"type":"object"}`+"`"+`
			target app api GET /slow
		}
		tool hold {
			description "Held until released."
			input_schema `+"`"+`{"type":"object"}`+"`"+`
			target app api GET /hold
		}
		tool card {
			description "A card."
			input_schema `+"`"+`{"type":"object"}`+"`"+`
			target app api GET /card
		}
	}
}
`, port, upstreamURL, ledgerLine, dataDir)
	f := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(f, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	in := &instance{base: fmt.Sprintf("http://127.0.0.1:%d", port), config: f, log: new(bytes.Buffer),
		env: append(os.Environ(), "XDG_DATA_HOME="+dataDir, "XDG_CONFIG_HOME="+dataDir)}
	in.run(t)
	return in
}

// run starts the process on the instance's config and waits until it
// answers.
func (in *instance) run(t *testing.T) {
	t.Helper()
	in.cmd = exec.Command(toolgateBinary(t), "run", "--config", in.config, "--adapter", "caddyfile")
	in.cmd.Env = in.env
	in.cmd.Stdout, in.cmd.Stderr = in.log, in.log
	if err := in.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.kill)
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(in.base + "/tools"); err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	in.kill()
	t.Fatalf("toolgate did not start:\n%s", in.log)
}

// kill stops the process at once, as a crash would.
func (in *instance) kill() {
	if in.cmd.Process != nil && in.cmd.ProcessState == nil {
		_ = in.cmd.Process.Kill()
		_ = in.cmd.Wait()
	}
}

type answer struct {
	Status  string         `json:"status"`
	IsError bool           `json:"isError"`
	Content string         `json:"content"`
	Card    jsontext.Value `json:"card"`
	Error   *struct {
		Code string `json:"code"`
	} `json:"error"`
}

func (in *instance) post(t *testing.T, path, body string) (int, answer) {
	t.Helper()
	resp, err := http.Post(in.base+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var a answer
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("POST %s: %s", path, raw)
	}
	return resp.StatusCode, a
}

const envelope = `"identity":{"user":"u_1","install":"in_1"},"context":{"source":"thread","threadId":"th_1"}`

func TestTwoInstancesOnRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	rs := redistest.Start(t)
	up := newUpstream(t)
	line := "ledger redis " + rs.Addr + " {\n\t\t\tprefix tg-test:\n\t\t}"
	a := startInstance(t, line, up.srv.URL, t.TempDir())
	b := startInstance(t, line, up.srv.URL, t.TempDir())

	// A call started on one is resumed on the other.
	if _, r := a.post(t, "/tools/card", `{"input":{},"callId":"x1",`+envelope+`}`); r.Status != "action_required" {
		t.Fatalf("card on A: %+v", r)
	}
	if status, r := b.post(t, "/calls/x1/resume", `{"buttonId":"yes","identity":{"user":"u_1","install":"in_1"}}`); status != 200 || r.Content != "yes pressed" {
		t.Fatalf("resume on B: %d %+v", status, r)
	}
	if status, r := a.post(t, "/calls/x1/resume", `{"buttonId":"yes","identity":{"user":"u_1","install":"in_1"}}`); status != 200 || r.Content != "yes pressed" {
		t.Errorf("the same resume on A: %d %+v", status, r)
	}

	// The same call id sent to both at once runs once.
	before := up.hits.Load()
	var wg sync.WaitGroup
	got := make([]answer, 2)
	for i, in := range []*instance{a, b} {
		wg.Add(1)
		go func(i int, in *instance) {
			defer wg.Done()
			_, got[i] = in.post(t, "/tools/slow", `{"input":{},"callId":"x2",`+envelope+`}`)
		}(i, in)
	}
	wg.Wait()
	if n := up.hits.Load() - before; n != 1 {
		t.Errorf("one call id on two instances ran %d times", n)
	}
	if got[0].Content == "" || got[0].Content != got[1].Content || got[0].Status != got[1].Status {
		t.Errorf("answers differ: %+v vs %+v", got[0], got[1])
	}

	// A waiter on B wakes when A finishes: B answers as soon as the held
	// call is released, far sooner than its in-flight deadline.
	done := make(chan answer, 1)
	go func() {
		_, r := a.post(t, "/tools/hold", `{"input":{},"callId":"x3",`+envelope+`}`)
		done <- r
	}()
	<-up.started
	waited := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		_, r := b.post(t, "/tools/hold", `{"input":{},"callId":"x3",`+envelope+`}`)
		if r.Content != "held" {
			t.Errorf("waiter on B got %+v", r)
		}
		waited <- time.Since(start)
	}()
	time.Sleep(300 * time.Millisecond) // let B start waiting
	released := time.Now()
	close(up.release)
	if r := <-done; r.Content != "held" {
		t.Errorf("A got %+v", r)
	}
	<-waited
	if lag := time.Since(released); lag > 3*time.Second {
		t.Errorf("B woke %s after A finished; it must be woken, not time out", lag)
	}
}

func TestBoltSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	up := newUpstream(t)
	data := t.TempDir()
	line := "ledger bolt " + filepath.Join(data, "ledger.db")
	in := startInstance(t, line, up.srv.URL, data)

	// A finished call, recorded before its answer was written.
	_, first := in.post(t, "/tools/slow", `{"input":{},"callId":"k1",`+envelope+`}`)
	// A call in flight when the process dies.
	go func() {
		resp, err := http.Post(in.base+"/tools/hold", "application/json", strings.NewReader(`{"input":{},"callId":"k2",`+envelope+`}`))
		if err == nil {
			resp.Body.Close()
		}
	}()
	if key := <-up.started; key != apptools.IdempotencyKey("u_1", "in_1", "k2") {
		t.Fatalf("held call has Idempotency-Key %q", key)
	}
	in.kill()

	in = startInstance(t, line, up.srv.URL, data)
	before := up.hits.Load()
	if _, again := in.post(t, "/tools/slow", `{"input":{},"callId":"k1",`+envelope+`}`); again.Content != first.Content || again.IsError {
		t.Errorf("after kill -9 the finished call answers %+v, want the recorded %+v", again, first)
	}
	_, lost := in.post(t, "/tools/hold", `{"input":{},"callId":"k2",`+envelope+`}`)
	if !lost.IsError || !strings.Contains(lost.Content, "outcome unknown") {
		t.Errorf("the call in flight at the crash answers %+v, want outcome unknown", lost)
	}
	if n := up.hits.Load() - before; n != 0 {
		t.Errorf("after the restart the target ran %d more times", n)
	}
}

// TestTwoInstancesClientTool: on Redis a page streaming from B answers a
// client tool call made on A, claims count across instances, and a claim
// lapses when the thread has no stream left on either.
func TestTwoInstancesClientTool(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	rs := redistest.Start(t)
	up := newUpstream(t)
	line := "ledger redis " + rs.Addr + " {\n\t\t\tprefix tg-test:\n\t\t}" + clientTool
	a := startInstance(t, line, up.srv.URL, t.TempDir())
	b := startInstance(t, line, up.srv.URL, t.TempDir())
	tok := apitest.InstallPageToken(t, "u_1", "in_1", "th_1")
	page := openPage(t, b, tok)

	answered := make(chan []byte, 1)
	go func() {
		_, raw := rawDo(t, a, http.MethodPost, "/tools/where", `{"input":{"q":1},"callId":"ct1",`+envelope+`}`)
		answered <- raw
	}()
	if o := page.NextWithin(t, 10*time.Second); o.CallID != "ct1" || o.Name != "video_position" || string(o.Input) != `{"q":1}` {
		t.Fatalf("the page on B was offered %+v, want ct1", o)
	}
	if status, msg := pagePost(t, a, tok, "ct1", "claim", ""); status != 200 {
		t.Fatalf("claim on A: %d %s", status, msg)
	}
	if status, msg := pagePost(t, b, tok, "ct1", "claim", ""); status != 409 {
		t.Errorf("a second claim, on B: %d %s, want 409", status, msg)
	}
	if status, msg := pagePost(t, b, tok, "ct1", "result", `{"result":{"positionSeconds":83}}`); status != 200 {
		t.Fatalf("result on B: %d %s", status, msg)
	}
	var raw []byte
	select {
	case raw = <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("the call on A did not answer")
	}
	if r := parse(t, raw); r.Status != "done" || r.IsError || r.Content != `{"positionSeconds":83}` {
		t.Errorf("the call on A answered %s", raw)
	}
	if status, msg := pagePost(t, a, tok, "ct1", "result", `{"result":"again"}`); status != 409 {
		t.Errorf("a second result, on A: %d %s, want 409", status, msg)
	}

	// The lapse rule across processes: the page on B claims a call made
	// on A and goes away without a result; with no stream of the thread
	// left anywhere the call is offered again, to a page on A.
	go func() {
		_, raw := rawDo(t, a, http.MethodPost, "/tools/where", `{"input":{"q":2},"callId":"ct2",`+envelope+`}`)
		answered <- raw
	}()
	if o := page.NextWithin(t, 10*time.Second); o.CallID != "ct2" {
		t.Fatalf("the page on B was offered %+v, want ct2", o)
	}
	if status, msg := pagePost(t, b, tok, "ct2", "claim", ""); status != 200 {
		t.Fatalf("claim on B: %d %s", status, msg)
	}
	page.Close()
	// B notices the page left shortly after it did: until then its stream
	// counts and the claim holds, so the page on A opens again.
	var again *apitest.PageStream
	for i := 0; again == nil; i++ {
		if i == 50 {
			t.Fatal("the call is never offered again after the page on B left")
		}
		s := openPage(t, a, tok)
		select {
		case o := <-s.Offers:
			if o.CallID != "ct2" {
				t.Fatalf("the page on A was offered %+v, want ct2", o)
			}
			again = s
		case <-time.After(100 * time.Millisecond):
			s.Close()
		}
	}
	defer again.Close()
	if status, msg := pagePost(t, a, tok, "ct2", "claim", ""); status != 200 {
		t.Fatalf("claim on A after the lapse: %d %s", status, msg)
	}
	if status, msg := pagePost(t, a, tok, "ct2", "result", `{"result":"from A"}`); status != 200 {
		t.Fatalf("result on A: %d %s", status, msg)
	}
	select {
	case raw = <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("ct2 did not answer")
	}
	if r := parse(t, raw); r.Status != "done" || r.IsError || r.Content != "from A" {
		t.Errorf("ct2 answered %s", raw)
	}
}
