package web

import (
	"bytes"
	"embed"
	"fmt"
	"path"
	"regexp"
	"strings"
	"sync"
)

// MCPAppURI is the MCP Apps resource that shows any tool's answer.
const MCPAppURI = "ui://toolgate/card"

// MCPAppMIMEType is the media type of an MCP Apps view (SEP-1865).
const MCPAppMIMEType = "text/html;profile=mcp-app"

// The view's own sources. They are under mcpapp/, out of reach of files'
// *.js *.html, so httpapi does not serve them.
//
//go:embed mcpapp/view.html mcpapp/view.js
var appFiles embed.FS

// mcpApp is the view, built once, when first asked for (an MCP server
// being set up), not at every start of the program (14 ms): a source that
// cannot be inlined is a bug caught by the package's tests, so it panics.
var mcpApp = sync.OnceValue(func() []byte {
	b, err := buildMCPApp()
	if err != nil {
		panic(err)
	}
	return b
})

// MCPApp returns the MCP Apps view served as MCPAppURI: one self-contained
// HTML document (no network loads of its own) that renders a tool result's
// structuredContent with <toolgate-card>. The caller owns the copy.
func MCPApp() []byte {
	return bytes.Clone(mcpApp())
}

// The view's modules in dependency order: each may import only those
// before it.
var appModules = []struct {
	name string
	fs   embed.FS
	file string
}{
	{"marked.js", files, "marked.js"},
	{"form.js", files, "form.js"},
	{"card.js", files, "card.js"},
	{"mcpapp/view.js", appFiles, "mcpapp/view.js"},
}

// moduleSlot is where view.html takes the inlined module.
const moduleSlot = "/*toolgate:module*/"

// buildMCPApp inlines the view's modules into view.html as one module
// script. A host gives the view a CSP like "script-src 'unsafe-inline'":
// it may fetch no script, not even the import of an inline one, and
// blob:/data: modules are not allowed everywhere. So each module becomes a
// function scope that returns its exports, and its imports read them:
//
//	import { Marked } from "./marked.js";  ->  const { Marked } = __m_marked;
//
// Only the forms these files use are understood; anything else is an
// error naming the file rather than a view that breaks in a host.
func buildMCPApp() ([]byte, error) {
	page, err := appFiles.ReadFile("mcpapp/view.html")
	if err != nil {
		return nil, err
	}
	var js strings.Builder
	done := map[string]string{} // module path -> its variable
	for _, m := range appModules {
		src, err := m.fs.ReadFile(m.file)
		if err != nil {
			return nil, err
		}
		v := moduleVar(m.name)
		body, err := inlineModule(m.name, string(src), done, v)
		if err != nil {
			return nil, err
		}
		js.WriteString(body)
		done[m.name] = v
	}
	script := scriptSafe(js.String())
	if strings.Count(string(page), moduleSlot) != 1 {
		return nil, fmt.Errorf("mcpapp/view.html: want one %s", moduleSlot)
	}
	return []byte(strings.Replace(string(page), moduleSlot, script, 1)), nil
}

// moduleVar is the variable holding a module's exports: card.js -> __m_card.
func moduleVar(name string) string {
	return "__m_" + strings.TrimSuffix(path.Base(name), ".js")
}

var (
	importLine  = regexp.MustCompile(`(?m)^import \{([^}]*)\} from "([^"]+)";[ \t]*$`)
	exportDecl  = regexp.MustCompile(`(?m)^export ((?:async )?function\*?|class|const|let|var) ([A-Za-z_$][\w$]*)`)
	exportList  = regexp.MustCompile(`\bexport ?\{([^}]*)\};?`)
	binding     = regexp.MustCompile(`^([A-Za-z_$][\w$]*)(?: as ([A-Za-z_$][\w$]*))?$`)
	sourceMap   = regexp.MustCompile(`(?m)^//# sourceMappingURL=.*$`)
	anyImport   = regexp.MustCompile(`(?m)^\s*import\b|\bimport\s*\(|\bimport\.meta\b`)
	anyExport   = regexp.MustCompile(`(?m)^\s*export\b`)
	scriptBreak = regexp.MustCompile(`(?i)<(/?script|!--)`)
)

// inlineModule turns one module's source into a statement that assigns
// its exports to v, given the variables of the modules done so far
// (by path relative to internal/web).
func inlineModule(name, src string, done map[string]string, v string) (string, error) {
	var errs []string
	src = sourceMap.ReplaceAllString(src, "")
	src = importLine.ReplaceAllStringFunc(src, func(line string) string {
		sm := importLine.FindStringSubmatch(line)
		from := path.Join(path.Dir(name), sm[2])
		mv, ok := done[from]
		if !ok {
			errs = append(errs, fmt.Sprintf("imports %q, which is not inlined before it", sm[2]))
			return line
		}
		var names []string
		for _, b := range strings.Split(sm[1], ",") {
			bm := binding.FindStringSubmatch(strings.TrimSpace(b))
			if bm == nil {
				errs = append(errs, fmt.Sprintf("cannot inline the import %q", line))
				return line
			}
			if bm[2] != "" {
				names = append(names, bm[1]+": "+bm[2])
			} else {
				names = append(names, bm[1])
			}
		}
		return "const { " + strings.Join(names, ", ") + " } = " + mv + ";"
	})
	var exports []string
	src = exportDecl.ReplaceAllStringFunc(src, func(decl string) string {
		dm := exportDecl.FindStringSubmatch(decl)
		exports = append(exports, dm[2])
		return dm[1] + " " + dm[2]
	})
	if n := len(exportList.FindAllString(src, -1)); n > 1 {
		errs = append(errs, fmt.Sprintf("has %d export lists, want at most one", n))
	}
	src = exportList.ReplaceAllStringFunc(src, func(list string) string {
		lm := exportList.FindStringSubmatch(list)
		for _, b := range strings.Split(lm[1], ",") {
			bm := binding.FindStringSubmatch(strings.TrimSpace(b))
			switch {
			case bm == nil:
				errs = append(errs, fmt.Sprintf("cannot inline the export %q", strings.TrimSpace(b)))
			case bm[2] != "":
				exports = append(exports, bm[2]+": "+bm[1])
			default:
				exports = append(exports, bm[1])
			}
		}
		return ";"
	})
	if loc := anyImport.FindStringIndex(src); loc != nil {
		errs = append(errs, fmt.Sprintf("has an import that cannot be inlined at byte %d", loc[0]))
	}
	if loc := anyExport.FindStringIndex(src); loc != nil {
		errs = append(errs, fmt.Sprintf("has an export that cannot be inlined at byte %d", loc[0]))
	}
	if len(errs) > 0 {
		return "", fmt.Errorf("mcpapp: %s: %s", name, strings.Join(errs, "; "))
	}
	return fmt.Sprintf("// %s\nconst %s = (() => {\n%s\nreturn { %s };\n})();\n", name, v, src, strings.Join(exports, ", ")), nil
}

// scriptSafe keeps a script from ending or changing its element early:
// "</script", "<script" and "<!--" may stand in JavaScript only in
// strings, regular expressions, templates and comments, where \x3C is the
// same "<" (in a comment, it is a comment).
func scriptSafe(js string) string {
	return scriptBreak.ReplaceAllString(js, `\x3C$1`)
}
