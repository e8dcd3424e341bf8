package web

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// appParts splits the view into its one module script and everything
// else, failing on any other script.
func appParts(t *testing.T, doc []byte) (script string, tags []html.Token) {
	t.Helper()
	z := html.NewTokenizer(bytes.NewReader(doc))
	scripts := 0
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		tok := z.Token()
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		tags = append(tags, tok)
		if tok.Data == "script" {
			scripts++
			if z.Next() != html.TextToken {
				t.Fatal("an empty script")
			}
			script = string(z.Text())
		}
	}
	if scripts != 1 {
		t.Fatalf("%d scripts, want the one module", scripts)
	}
	return script, tags
}

// TestMCPAppSelfContained checks that the view loads nothing: no element
// names a URL, the one script is an inline module that imports nothing,
// and the styles fetch nothing.
func TestMCPAppSelfContained(t *testing.T) {
	doc := MCPApp()
	script, tags := appParts(t, doc)
	for _, tok := range tags {
		switch tok.Data {
		case "link", "img", "iframe", "object", "embed", "base", "frame":
			t.Errorf("<%s> in the view", tok.Data)
		}
		for _, a := range tok.Attr {
			switch a.Key {
			case "src", "href", "srcset", "action", "formaction", "data", "poster", "background", "ping":
				t.Errorf("<%s %s=%q>", tok.Data, a.Key, a.Val)
			case "http-equiv":
				t.Errorf("<%s http-equiv=%q>: the host sets the policy", tok.Data, a.Val)
			}
		}
		if tok.Data == "script" {
			if len(tok.Attr) != 1 || tok.Attr[0].Key != "type" || tok.Attr[0].Val != "module" {
				t.Errorf("script %v, want just type=module", tok.Attr)
			}
		}
	}
	// Code that fetches: imports (static or dynamic) and source maps.
	for _, re := range []string{`(?m)^\s*import\b`, `\bimport\s*\(`, `(?m)^\s*export\b`, `sourceMappingURL`, `(?i)</script`, `<!--`} {
		if loc := regexp.MustCompile(re).FindStringIndex(script); loc != nil {
			t.Errorf("the module has %s: %q", re, script[max(0, loc[0]-40):min(len(script), loc[1]+40)])
		}
	}
	css := string(doc[:bytes.Index(doc, []byte("<script"))])
	for _, s := range []string{"url(", "@import"} {
		if strings.Contains(css, s) {
			t.Errorf("the styles have %s", s)
		}
	}
	// What it was built from is all there, and the slot is gone.
	for _, s := range []string{"const __m_marked = ", "const __m_card = ", "const __m_view = ", "customElements.define(\"toolgate-card\""} {
		if !strings.Contains(script, s) {
			t.Errorf("the module lacks %q", s)
		}
	}
	if bytes.Contains(doc, []byte(moduleSlot)) {
		t.Error("the slot is still in the page")
	}
}

// TestMCPAppRuns runs the inlined module in Node (no document: the view
// does not start) and compares what its card renders with the card.js
// Node imports from its files: the inlining changed no behaviour.
func TestMCPAppRuns(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node")
	}
	script, _ := appParts(t, MCPApp())
	dir := t.TempDir()
	check := `
const files = await import(` + "`" + `file://${process.env.WEB_DIR}/card.js` + "`" + `);
const view = await import(` + "`" + `file://${process.env.WEB_DIR}/mcpapp/view.js` + "`" + `);
const inlined = __m_card, inlinedView = __m_view;
const md = "# T\n**x** <!-- c --> <script>alert(1)</script> [l](https://go.dev) [j](javascript:1)\n\n- a\n- [x] b\n\n| a | b |\n|---|---|\n| 1 | 2 |";
const got = inlined.markdownHTML(md), want = files.markdownHTML(md);
if (got !== want) throw new Error("markdown differs:\n" + got + "\n" + want);
if (!got.includes("&lt;!-- c --&gt;") || !got.includes("&lt;script&gt;")) throw new Error("raw HTML not escaped: " + got);
if (inlined.embedHeight(1e9, 100, 0) !== files.EMBED_MAX_PX) throw new Error("embedHeight");
const r = { structuredContent: { status: "action_required", callId: "c" }, _meta: { "toolgate/state": "s" } };
if (inlinedView.stateOf(r) !== "s" || inlinedView.answerOf(r).callId !== "c") throw new Error("view");
if (JSON.stringify(inlinedView.answerArgs("s", { buttonId: "b" })) !== JSON.stringify(view.answerArgs("s", { buttonId: "b" }))) throw new Error("answerArgs");
const changed = { buttonId: "approve", input: { amount: 3 } };
if (JSON.stringify(inlinedView.answerArgs("s", changed)) !== '{"state":"s","button":"approve","input":{"amount":3}}') throw new Error("answerArgs with input");
const rows = inlined.approvalRows({ to: "<b>", n: { a: 1 } });
if (JSON.stringify(rows) !== JSON.stringify(files.approvalRows({ to: "<b>", n: { a: 1 } }))) throw new Error("approvalRows");
const p = __m_form.plan({ type: "object", properties: { amount: { type: "number" } } });
if (__m_form.prefill(p, { amount: 3 }).get(p.children[0]) !== "3") throw new Error("form.js");
console.log("ok");
`
	f := filepath.Join(dir, "view.mjs")
	if err := os.WriteFile(f, []byte(script+check), 0o644); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	cmd := exec.Command(node, f)
	cmd.Env = append(os.Environ(), "WEB_DIR="+wd)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("node: %v\n%s", err, out)
	}
}

// TestMCPAppBuiltOnce checks that MCPApp copies the page built at start,
// and that a caller's change to its copy is its own.
func TestMCPAppBuiltOnce(t *testing.T) {
	a := MCPApp()
	if n := testing.AllocsPerRun(10, func() { _ = MCPApp() }); n != 1 {
		t.Errorf("MCPApp allocates %v times a call, want 1 (the copy)", n)
	}
	a[0] = 'X'
	if b := MCPApp(); b[0] != '<' || !bytes.Equal(b[1:], a[1:]) {
		t.Error("a caller's change reached the page")
	}
}

// TestInlineModuleRefuses checks that a module the inliner does not
// understand is an error naming it, not a broken page.
func TestInlineModuleRefuses(t *testing.T) {
	done := map[string]string{"card.js": "__m_card"}
	for _, tc := range []struct{ src, want string }{
		{`import card from "./card.js";`, "import that cannot be inlined"},
		{`import * as card from "./card.js";`, "import that cannot be inlined"},
		{`import { a } from "./other.js";`, `imports "./other.js", which is not inlined before it`},
		{`import { a-b } from "./card.js";`, "cannot inline the import"},
		{`const m = await import("./card.js");`, "import that cannot be inlined"},
		{`export default 1;`, "export that cannot be inlined"},
		{`export * from "./card.js";`, "export that cannot be inlined"},
		{"const a = 1;\nexport { a as };", "cannot inline the export"},
		{"export { a };\nexport { b };", "2 export lists"},
	} {
		_, err := inlineModule("x.js", tc.src, done, "__m_x")
		if err == nil || !strings.Contains(err.Error(), "mcpapp: x.js: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.src, err, tc.want)
		}
	}
	got, err := inlineModule("x.js", "import { A, B as C } from \"./card.js\";\nexport const D = A + C;\nconst e = 1;\nexport { e as E };\n", done, "__m_x")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"const { A, B: C } = __m_card;", "\nconst D = A + C;", "return { D, E: e };", "const __m_x = (() => {"} {
		if !strings.Contains(got, want) {
			t.Errorf("inlined:\n%s\nlacks %q", got, want)
		}
	}
}

func TestScriptSafe(t *testing.T) {
	got := scriptSafe(`a = "</script><SCRIPT>"; b = /<!--x/; // </Script`)
	want := `a = "\x3C/script>\x3CSCRIPT>"; b = /\x3C!--x/; // \x3C/Script`
	if got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}
