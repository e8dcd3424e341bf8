package caddymodule

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/apitest"
)

// tsConfig serves the tools of the manifest at path, on a component
// upstream.
func tsConfig(t *testing.T, path, upstream string) string {
	return testGlobals(dataDir(t)) + `http://127.0.0.1:9080 {
	bind 127.0.0.1
	handle_path /toolgate/* {
		toolgate {
			manifest ` + path + `
			component api ` + upstream + `
			ledger off
		}
	}
}`
}

// kitProject makes a folder outside the repository for a tools.ts that
// resolves zod and finds toolgate-tools as an app would: through its own
// node_modules (a link to the repository's, where `npm ci` installed the
// kit). Without node or that install it skips, but not in CI, which
// installs both.
func kitProject(t *testing.T) string {
	t.Helper()
	modules, err := filepath.Abs(filepath.Join("..", "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	_, noNode := exec.LookPath("node")
	_, noKit := os.Stat(filepath.Join(modules, ".bin", "toolgate-tools"))
	if noNode != nil || noKit != nil {
		msg := "the TypeScript manifest needs node and the kit (npm ci at the repository root)"
		if os.Getenv("CI") != "" {
			t.Fatalf("%s: %v %v", msg, noNode, noKit)
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// The tool contract's style (docs/kits.md, "The examples' tools.ts"): Zod
// input schemas, a shared target, satisfies.
const toolsTS = `import { z } from 'zod';
import type { KazzleTool } from '@toolgate/kit/tools';

const api = { type: 'app', component: 'api' } as const;

export const tools = [
  {
    name: 'save_note',
    displayName: 'Save note',
    description: 'Save a note for the user.',
    input: z.object({
      title: z.string().min(1).max(80),
      tags: z.array(z.string()).max(3).optional(),
    }).strict(),
    target: { ...api, method: 'POST', path: '/items/${input.title}', body: '${input}' },
  },
  // EXTRA
] as const satisfies readonly KazzleTool[];
`

// TestManifestTypeScript loads `manifest tools.ts` with the real compiler
// and calls its tool end to end. tools.ts then changes: a reload of the
// same config is skipped by Caddy ("config is unchanged"), a forced one
// (`caddy reload --force`) compiles it again; a forced reload of a tools.ts
// that breaks a rule only the gateway can check (its components) fails
// naming the file and the tool, and the running config keeps serving.
func TestManifestTypeScript(t *testing.T) {
	dir := kitProject(t)
	tools := filepath.Join(dir, "tools.ts")
	writeFile(t, tools, toolsTS)
	rec := apitest.NewRecorder(t)
	cfg := tsConfig(t, tools, rec.URL)
	tc := caddytest.NewTester(t)
	initServer(tc, cfg)

	status, a := client(tc).Invoke(t, "save_note", `{"input":{"title":"a b","tags":["x"]},`+apitest.Who+`}`)
	if status != 200 || a.IsError || a.Content != "ok" {
		t.Fatalf("save_note: %d %+v", status, a)
	}
	got := rec.Get(t, "/items/")
	var body struct {
		Title string   `json:"title"`
		Tags  []string `json:"tags"`
	}
	if err := json.Unmarshal(got.Body, &body); err != nil || got.Method != "POST" || got.Path != "/items/a%20b" ||
		body.Title != "a b" || len(body.Tags) != 1 || body.Tags[0] != "x" {
		t.Errorf("the upstream saw %s %s %s", got.Method, got.Path, got.Body)
	}
	// The schema is Zod's: strict, min 1, at most 3 tags.
	for _, input := range []string{`{"title":""}`, `{"title":"a","x":1}`, `{"title":"a","tags":["1","2","3","4"]}`} {
		if status, a := client(tc).Invoke(t, "save_note", `{"input":`+input+`,`+apitest.Who+`}`); status != 200 || !a.IsError || !strings.HasPrefix(a.Content, "invalid input:") {
			t.Errorf("input %s: %d %+v, want invalid", input, status, a)
		}
	}

	writeFile(t, tools, strings.Replace(toolsTS, "// EXTRA", `{
    name: 'ping', displayName: 'Ping', description: 'Ping.', input: z.object({}).strict(),
    target: { ...api, method: 'GET', path: '/ping' },
  },`, 1))
	if status, body := adminLoad(t, tc, cfg, false); status != 200 {
		t.Fatalf("reload: %d %s", status, body)
	}
	if status, _ := client(tc).Invoke(t, "ping", `{"input":{},`+apitest.Who+`}`); status != 404 {
		t.Errorf("ping after an unforced reload of the same config: %d, want 404 (Caddy skips it)", status)
	}
	if status, body := adminLoad(t, tc, cfg, true); status != 200 {
		t.Fatalf("forced reload: %d %s", status, body)
	}
	if status, a := client(tc).Invoke(t, "ping", `{"input":{},`+apitest.Who+`}`); status != 200 || a.IsError || a.Content != "ok" {
		t.Fatalf("ping after the forced reload: %d %+v", status, a)
	}

	writeFile(t, tools, strings.Replace(toolsTS, "// EXTRA", `{
    name: 'elsewhere', displayName: 'Elsewhere', description: 'On a component the config lacks.',
    input: z.object({}).strict(), target: { type: 'app', component: 'nowhere', method: 'GET', path: '/' },
  },`, 1))
	status, msg := adminLoad(t, tc, cfg, true)
	if want := `manifest ` + tools + `: tool \"elsewhere\": target: app target: component \"nowhere\" is not declared`; status != 400 || !strings.Contains(msg, want) {
		t.Errorf("a reload with a broken tools.ts: %d %s\nwant 400 and %s", status, msg, want)
	}
	if status, a := client(tc).Invoke(t, "ping", `{"input":{},`+apitest.Who+`}`); status != 200 || a.IsError {
		t.Errorf("ping after a failed reload: %d %+v", status, a)
	}
}

// adminLoad posts a Caddyfile to the admin API's /load, as `caddy reload`
// does; force is its --force (Cache-Control: must-revalidate), without
// which Caddy skips a config equal to the running one.
func adminLoad(t *testing.T, tc *caddytest.Tester, caddyfile string, force bool) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", "http://localhost:2999/load", strings.NewReader(caddyfile))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/caddyfile")
	if force {
		req.Header.Set("Cache-Control", "must-revalidate")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	// A reload shuts the earlier servers down; see initServer.
	settle(tc)
	return resp.StatusCode, string(b)
}

// A tools.ts the compiler refuses: the config error is the compiler's,
// naming the file and the tool.
func TestManifestTypeScriptCompilerError(t *testing.T) {
	dir := kitProject(t)
	tools := filepath.Join(dir, "tools.ts")
	writeFile(t, tools, strings.Replace(toolsTS, "// EXTRA", `{
    name: 'loose', displayName: 'Loose', description: 'No schema.', input: { type: 'object' },
    target: { ...api, method: 'GET', path: '/x' },
  } as any,`, 1))
	caddytest.AssertLoadError(t, tsConfig(t, tools, "http://127.0.0.1:1"), "caddyfile",
		`manifest `+tools+`: toolgate-tools: `+tools+`: tool \"loose\": input`)
}

// Without node on PATH, `manifest tools.ts` is a config error that says
// how to do without it.
func TestManifestTypeScriptWithoutNode(t *testing.T) {
	tools := filepath.Join(t.TempDir(), "tools.ts")
	writeFile(t, tools, toolsTS)
	t.Setenv("PATH", t.TempDir())
	out := strings.TrimSuffix(tools, ".ts") + ".json"
	caddytest.AssertLoadError(t, tsConfig(t, tools, "http://127.0.0.1:1"), "caddyfile",
		"manifest "+tools+": a TypeScript manifest is compiled with Node.js, and node is not on PATH; "+
			"compile it ahead with `npx toolgate-tools build "+tools+" -o "+out+"` and use `manifest "+out+"`")
}

// `caddy validate` (and `toolgate validate`) provisions the handler, so it
// compiles a TypeScript manifest too, from the JSON config as from the
// Caddyfile. The compiler here is a shell script standing in for
// toolgate-tools, so this runs without Node.
func TestValidateCompilesTypeScript(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("a shell script stands in for the compiler")
	}
	dir := t.TempDir()
	pathDir := filepath.Join(dir, "bin")
	bin := filepath.Join(dir, "node_modules", ".bin")
	for _, d := range []string{pathDir, bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(pathDir, "node"), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", pathDir)
	tools := filepath.Join(dir, "tools.ts")
	writeFile(t, tools, "export const tools = []\n")
	ran := filepath.Join(dir, "ran")
	compiler := func(body string) {
		t.Helper()
		script := "#!/bin/sh\necho \"$*\" >> " + ran + "\n" + body + "\n"
		if err := os.WriteFile(filepath.Join(bin, "toolgate-tools"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	config, err := json.Marshal(map[string]any{
		"admin":   map[string]any{"disabled": true},
		"storage": map[string]any{"module": "file_system", "root": filepath.Join(dir, "storage")},
		"apps": map[string]any{"http": map[string]any{"servers": map[string]any{"s": map[string]any{
			"listen": []string{"127.0.0.1:0"},
			"routes": []any{map[string]any{"handle": []any{map[string]any{
				"handler": "toolgate", "manifests": []string{tools}, "ledger": map[string]any{"backend": "off"},
			}}}},
		}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	validate := func() error {
		var cfg caddy.Config
		if err := json.Unmarshal(config, &cfg); err != nil {
			t.Fatal(err)
		}
		return caddy.Validate(&cfg)
	}

	compiler(`echo '{"tools":[{"name":"where","description":"Where the page is.","input_schema":{"type":"object"},"target":{"type":"kazzle","name":"where"}}]}'`)
	if err := validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	if got, _ := os.ReadFile(ran); string(got) != "build "+tools+"\n" {
		t.Fatalf("the compiler ran as %q", got)
	}

	compiler(`echo 'toolgate-tools: tools.ts: tool "where": input: not a Zod schema' >&2; exit 1`)
	err = validate()
	if want := "manifest " + tools + `: toolgate-tools: tools.ts: tool "where": input: not a Zod schema`; err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("validate: %v\nwant it to end with %s", err, want)
	}
}
