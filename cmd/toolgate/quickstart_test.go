package main

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
)

// TestQuickstart runs examples/quickstart.sh as a user does, on ports of
// its own chosen by the variables it documents, and checks what a user
// meets: the steps named, the site answering (JSON 404s for wrong paths), a
// second quick start refused at once naming the first, the demo connection
// made through its card, a reload that keeps the page secret, and Ctrl-C
// stopping everything.
func TestQuickstart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the example")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules", ".bin", "toolgate-tools")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("the npm workspace is not installed (npm ci at the repository root)")
		}
		t.Skip("the npm workspace is not installed (npm ci at the repository root)")
	}
	ports := map[string]int{}
	for _, name := range []string{"TOOLGATE_PORT", "TOOLGATE_ADMIN_PORT", "BOOKMARKS_PORT", "NOTES_PORT", "CONTACTS_PORT"} {
		ports[name] = freePort(t)
	}
	// Caddy's storage (the ledger, the identity key) and its autosave go
	// to folders of this test, not the user's.
	home := t.TempDir()
	env := append(os.Environ(), "XDG_DATA_HOME="+filepath.Join(home, "data"), "XDG_CONFIG_HOME="+filepath.Join(home, "config"))
	for name, port := range ports {
		env = append(env, fmt.Sprintf("%s=%d", name, port))
	}
	site := fmt.Sprintf("http://127.0.0.1:%d", ports["TOOLGATE_PORT"])

	cmd := exec.Command("examples/quickstart.sh")
	cmd.Dir = root
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	lines := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()

	// Until toolgate is ready, keeping what was said.
	var said strings.Builder
	deadline := time.After(8 * time.Minute)
	for ready := false; !ready; {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the quick start ended before toolgate was ready:\n%s", said.String())
			}
			said.WriteString(line + "\n")
			ready = strings.Contains(line, `"msg":"serving initial configuration"`)
		case <-deadline:
			t.Fatalf("toolgate was not ready after 8 minutes:\n%s", said.String())
		}
	}
	go func() {
		for range lines {
		}
	}()
	banner := said.String()
	for i := 1; i <= 5; i++ {
		if !strings.Contains(banner, fmt.Sprintf("[%d/5] ", i)) {
			t.Errorf("step %d/5 is not named:\n%s", i, banner)
		}
	}
	if !strings.Contains(banner, site+"/toolgate/playground") || strings.Contains(banner, "127.0.0.1:8080") {
		t.Errorf("the banner does not name this run's site %s:\n%s", site, banner)
	}
	reload := fmt.Sprintf("TOOLGATE_PORT=%d TOOLGATE_ADMIN_PORT=%d", ports["TOOLGATE_PORT"], ports["TOOLGATE_ADMIN_PORT"])
	if !strings.Contains(banner, reload) || !strings.Contains(banner, "reload --config Caddyfile.example") {
		t.Errorf("the banner's reload command does not name this run's ports (%s):\n%s", reload, banner)
	}

	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get(site + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/toolgate/mcp/", "/toolgate/tool", "/nope"} {
		status, body := get(path)
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if status != 404 || json.Unmarshal([]byte(body), &e) != nil || e.Error.Code != "not_found" || !strings.Contains(e.Error.Message, "/toolgate/tools") {
			t.Errorf("GET %s: %d %s; want a JSON 404 that says where the endpoints are", path, status, body)
		}
	}
	if status, body := get("/toolgate/tools"); status != 200 || !strings.Contains(body, `"save_bookmark"`) || !strings.Contains(body, `"crm_search_contacts"`) {
		t.Errorf("GET /toolgate/tools: %d %.200s", status, body)
	}
	// The contacts MCP server behind toolgate verified the identity token
	// toolgate sent it against toolgate's JWKS.
	resp, err := client.Post(site+"/toolgate/tools/crm_whoami", "application/json", strings.NewReader(`{"input":{},"identity":{"user":"u_1","install":"in_1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	whoami, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(whoami), "user=u_1 install=in_1 aud=contacts verified=true") {
		t.Errorf("crm_whoami: %d %s", resp.StatusCode, whoami)
	}

	// Deleting a contact waits for the user's approval: listed as
	// waiting, and a rejection deletes nothing.
	post := func(path, body string) (int, string) {
		t.Helper()
		resp, err := client.Post(site+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	me := `"identity":{"user":"u_1","install":"in_1"}`
	if status, body := post("/toolgate/tools/crm_delete_contact", `{"input":{"id":"c1"},"callId":"qs_del",`+me+`,"context":{"source":"thread","threadId":"th_qs"}}`); status != 200 ||
		!strings.Contains(body, `"status":"action_required"`) || !strings.Contains(body, `"title":"Delete this contact?"`) {
		t.Errorf("crm_delete_contact: %d %s", status, body)
	}
	if status, body := get("/toolgate/waiting?user=u_1&install=in_1"); status != 200 || !strings.Contains(body, `"callId":"qs_del"`) {
		t.Errorf("GET /toolgate/waiting: %d %.300s", status, body)
	}
	if status, body := post("/toolgate/calls/qs_del/resume", `{"buttonId":"reject",`+me+`}`); status != 200 || !strings.Contains(body, "rejected") {
		t.Errorf("rejecting the deletion: %d %s", status, body)
	}
	if status, body := post("/toolgate/tools/crm_search_contacts", `{"input":{"query":"Ada"},`+me+`}`); status != 200 || !strings.Contains(body, "Ada Lovelace") {
		t.Errorf("after the rejection Ada is gone: %d %s", status, body)
	}

	demoConnection(t, site, fmt.Sprintf("http://127.0.0.1:%d", ports["BOOKMARKS_PORT"]), get, post)

	// A page token from the component, signed with the secret the quick
	// start gave both processes, verifies before and after a reload run
	// from a shell that does not have the secret.
	claim := func() int {
		t.Helper()
		if status, body := get("/app/page?thread=th_1"); status != 200 {
			t.Fatalf("the example page: %d %.200s", status, body)
		}
		status, body := get("/app/page-token?thread=th_1")
		var tok struct {
			Token string `json:"token"`
		}
		if status != 200 || json.Unmarshal([]byte(body), &tok) != nil || tok.Token == "" {
			t.Fatalf("a page token: %d %.200s", status, body)
		}
		req, _ := http.NewRequest("POST", site+"/toolgate/client/calls/c_none/claim", strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+tok.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// 404: the token verified, and there is no such call.
	if status := claim(); status != 404 {
		t.Fatalf("a page's claim before the reload: %d; want 404 (token accepted, no such call)", status)
	}

	start := time.Now()
	second := exec.Command("examples/quickstart.sh")
	second.Dir = root
	second.Env = env
	b, err := second.CombinedOutput()
	took := time.Since(start)
	if err == nil || took > 10*time.Second ||
		!strings.Contains(string(b), strconv.Itoa(ports["TOOLGATE_PORT"])) || !strings.Contains(string(b), "already in use") {
		t.Errorf("a second quick start: %v after %s:\n%s\nwant a refusal within 10s naming the port in use", err, took, b)
	}
	if status, _ := get("/toolgate/tools"); status != 200 {
		t.Errorf("the first quick start after the second was refused: %d", status)
	}

	var noSecret []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "TOOLGATE_PAGE_SECRET=") {
			noSecret = append(noSecret, kv)
		}
	}
	rl := exec.Command(toolgateBinary(t), "reload", "--config", "Caddyfile.example", "--adapter", "caddyfile")
	rl.Dir = root
	rl.Env = noSecret
	if b, err := rl.CombinedOutput(); err != nil {
		t.Fatalf("toolgate reload: %v\n%s", err, b)
	}
	if status := claim(); status != 404 {
		t.Errorf("a page's claim after the reload: %d; want 404 (the same page secret)", status)
	}

	// Ctrl-C stops toolgate and the components.
	syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the quick start did not stop within 20s of Ctrl-C")
	}
	for name, port := range ports {
		if c, err := (&http.Client{Timeout: time.Second}).Get(fmt.Sprintf("http://127.0.0.1:%d/", port)); err == nil {
			c.Body.Close()
			t.Errorf("%s %d still answers after Ctrl-C", name, port)
		}
	}
}

// demoConnection checks the quick start's connection (docs/connections.md):
// demo_account on a thread answers the connect card, whose button opens
// the demo sign-in service of the bookmarks component at bookmarks; a
// browser's way through its consent page (Allow) and back to the gateway's
// callback runs the waiting call; the user is then connected, and the
// next call goes straight through.
func demoConnection(t *testing.T, site, bookmarks string, get func(string) (int, string), post func(string, string) (int, string)) {
	t.Helper()
	me := `"identity":{"user":"u_1","install":"in_1"}`
	status, body := post("/toolgate/tools/demo_account", `{"input":{},"callId":"qs_demo",`+me+`,"context":{"source":"thread","threadId":"th_qs"}}`)
	var a struct {
		Status string `json:"status"`
		Card   struct {
			Title    string `json:"title"`
			Elements []struct {
				ID  string `json:"id"`
				URL string `json:"url"`
			} `json:"elements"`
		} `json:"card"`
	}
	if status != 200 || json.Unmarshal([]byte(body), &a) != nil || a.Status != "action_required" ||
		a.Card.Title != "Connect Demo account" || len(a.Card.Elements) != 1 || a.Card.Elements[0].ID != "connect" {
		t.Fatalf("demo_account on a thread: %d %s; want the connect card", status, body)
	}
	auth, err := url.Parse(a.Card.Elements[0].URL)
	if err != nil || auth.Scheme+"://"+auth.Host+auth.Path != bookmarks+"/oauth/authorize" {
		t.Fatalf("the card's button opens %q, not the demo sign-in service at %s", a.Card.Elements[0].URL, bookmarks)
	}
	if got, want := auth.Query().Get("redirect_uri"), site+"/toolgate/connections/demo/callback"; got != want {
		t.Errorf("redirect_uri %q, want %q", got, want)
	}

	// What a browser does: the consent page, its form sent with Allow, the
	// redirect to the gateway's callback.
	browser := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	fetch := func(method, target string, form url.Values) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, target, strings.NewReader(form.Encode()))
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, page := fetch(http.MethodGet, auth.String(), nil)
	if resp.StatusCode != 200 || !strings.Contains(page, "Allow toolgate to read your demo account?") {
		t.Fatalf("the consent page: %d %s", resp.StatusCode, page)
	}
	form := url.Values{"decision": {"allow"}}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([^"]*)" value="([^"]*)">`).FindAllStringSubmatch(page, -1) {
		form.Set(html.UnescapeString(m[1]), html.UnescapeString(m[2]))
	}
	resp, _ = fetch(http.MethodPost, bookmarks+"/oauth/authorize", form)
	callback := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(callback, site+"/toolgate/connections/demo/callback?") {
		t.Fatalf("Allow: %d to %q; want a redirect to the gateway's callback", resp.StatusCode, callback)
	}
	if resp, page := fetch(http.MethodGet, callback, nil); resp.StatusCode != 200 || !strings.Contains(page, "Demo account is connected") {
		t.Fatalf("the callback: %d %s", resp.StatusCode, page)
	}

	answer := func(body string) (string, string) {
		var a struct {
			Status  string `json:"status"`
			Content string `json:"content"`
		}
		json.Unmarshal([]byte(body), &a)
		return a.Status, a.Content
	}
	if status, body := get("/toolgate/calls/qs_demo?user=u_1&install=in_1"); status != 200 {
		t.Errorf("GET /calls/qs_demo: %d %s", status, body)
	} else if s, c := answer(body); s != "done" || !strings.HasPrefix(c, "Your demo account: demo user; token issued ") {
		t.Errorf("the call that waited for the connection: %s", body)
	}
	if status, body := post("/toolgate/tools/demo_account", `{"input":{},`+me+`}`); status != 200 {
		t.Errorf("demo_account on an api call: %d %s", status, body)
	} else if s, c := answer(body); s != "done" || !strings.HasPrefix(c, "Your demo account: demo user") {
		t.Errorf("demo_account on an api call, connected: %s; want the account straight away", body)
	}
	status, body = get("/toolgate/connections?user=u_1&install=in_1")
	var list struct {
		Connections []struct {
			Name      string `json:"name"`
			Connected bool   `json:"connected"`
		} `json:"connections"`
	}
	if status != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list.Connections) != 1 ||
		list.Connections[0].Name != "demo" || !list.Connections[0].Connected {
		t.Errorf("GET /toolgate/connections: %d %s; want demo connected", status, body)
	}
}
