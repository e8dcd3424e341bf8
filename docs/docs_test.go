// Package docs holds the guides under docs/ and the test that keeps them,
// with the README, true to what a reader of the repository has: a short
// README that links every guide, links that lead to files, and no
// references to documents or trackers outside the repository.
package docs

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// maxReadmeLines keeps the README a landing page; the detail lives in docs/.
const maxReadmeLines = 250

// pending are pages the README links that are written on another branch.
// A link to one is not an error while the file is missing; remove the
// entry once the page is merged.
var pending = []string{}

// page is one Markdown file, by its path from the repository root.
type page struct {
	path  string
	lines []string
}

func readPage(t *testing.T, path string) page {
	t.Helper()
	f, err := os.Open(filepath.Join("..", filepath.FromSlash(path)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer f.Close()
	var p page
	p.path = path
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		p.lines = append(p.lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p
}

// pages returns README.md and every docs/*.md.
func pages(t *testing.T) []page {
	t.Helper()
	guides, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(guides)
	out := []page{readPage(t, "README.md")}
	for _, g := range guides {
		out = append(out, readPage(t, "docs/"+g))
	}
	return out
}

// A Markdown link or image: [text](target) or [text](target "title").
var linkRE = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// An inline code span, whose text is not a link even when it looks like one.
var codeSpanRE = regexp.MustCompile("`[^`]*`")

// A URL scheme: a link that starts with one leads outside the repository.
var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// link is one link target and where it was written.
type link struct {
	line   int
	target string
}

// links returns the links of p outside fenced code blocks.
func (p page) links() []link {
	var out []link
	fenced := false
	for i, l := range p.lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(codeSpanRE.ReplaceAllString(l, "``"), -1) {
			out = append(out, link{line: i + 1, target: m[1]})
		}
	}
	return out
}

// local reports whether a link target is a file of the repository, and
// returns its path from the repository root without its #anchor.
func (p page) local(target string) (string, bool) {
	if strings.HasPrefix(target, "#") || schemeRE.MatchString(target) {
		return "", false
	}
	target, _, _ = strings.Cut(target, "#")
	return filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(p.path), target))), true
}

func TestReadmeIsShort(t *testing.T) {
	readme := readPage(t, "README.md")
	if n := len(readme.lines); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, more than %d: move the detail to a page under docs/", n, maxReadmeLines)
	}
}

func TestReadmeLinksEveryGuide(t *testing.T) {
	readme := readPage(t, "README.md")
	linked := map[string]bool{}
	for _, l := range readme.links() {
		if path, ok := readme.local(l.target); ok {
			linked[path] = true
		}
	}
	guides, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range guides {
		if !linked["docs/"+g] {
			t.Errorf("README.md does not link docs/%s: add it to the list of guides", g)
		}
	}
}

func TestLinksLeadToFiles(t *testing.T) {
	for _, p := range pages(t) {
		for _, l := range p.links() {
			path, ok := p.local(l.target)
			if !ok {
				continue
			}
			if _, err := os.Stat(filepath.Join("..", filepath.FromSlash(path))); err != nil {
				if slices.Contains(pending, path) {
					continue
				}
				t.Errorf("%s:%d: link %q leads to %s, which does not exist", p.path, l.line, l.target, path)
			}
		}
	}
	for _, path := range pending {
		if _, err := os.Stat(filepath.Join("..", filepath.FromSlash(path))); err == nil {
			t.Logf("%s exists now: remove it from pending in docs/docs_test.go", path)
		}
	}
}

// TestOnlyWhatTheReaderHas refuses references to documents and trackers a
// reader of the repository does not have: a specification cited by
// section, the seed project, issue numbers.
func TestOnlyWhatTheReaderHas(t *testing.T) {
	banned := []struct {
		re  *regexp.Regexp
		why string
	}{
		{regexp.MustCompile(`\bSPEC\b`), "cites a specification the reader does not have"},
		{regexp.MustCompile(`§`), "cites a section of a document the reader does not have"},
		{regexp.MustCompile(`(?i)\bthe seed\b|\bseeds?/|\bseed's\b`), "refers to the seed project, which the reader does not have"},
		{regexp.MustCompile(`(?i)\bissues?\s+#?\d+`), "cites an issue number the reader cannot look up"},
		{regexp.MustCompile(`(^|[\s(\[])#\d+\b`), "cites an issue number the reader cannot look up"},
	}
	for _, p := range pages(t) {
		for i, l := range p.lines {
			for _, b := range banned {
				for _, at := range b.re.FindAllStringIndex(l, -1) {
					m := l[at[0]:at[1]]
					if strings.HasSuffix(strings.TrimSpace(l[:at[0]+1]), "PKCS") {
						continue // PKCS #8, a standard's number
					}
					t.Errorf("%s:%d: %q %s: say it in the page's own words, or cite a file of the repository", p.path, i+1, strings.TrimSpace(m), b.why)
				}
			}
		}
	}
}

// TestKazzleExplained: the kazzle target kind and the Kazzle-Tool-Context
// header keep a name from elsewhere on the wire; the configuration guide
// says once where it comes from.
func TestKazzleExplained(t *testing.T) {
	cfg := readPage(t, "docs/configuration.md")
	text := strings.Join(cfg.lines, " ") // a sentence may be wrapped
	for _, sentence := range strings.Split(text, ". ") {
		s := strings.ToLower(sentence)
		if strings.Contains(s, "kazzle") && strings.Contains(s, "name") && strings.Contains(s, "platform") {
			return
		}
	}
	t.Errorf("docs/configuration.md: no sentence explains the word kazzle (one holding \"kazzle\", \"name\" and \"platform\"): say that it is the name of the platform the protocol came from, kept on the wire")
}

// sourceExts are the files TestSourceCitesOnlyTheRepository reads: the
// repository's code, scripts, pages and the Markdown outside README.md and
// docs/ (which TestOnlyWhatTheReaderHas reads). A file without an extension
// is read when it is a script ("#!" on its first line), and Makefile by name.
var sourceExts = []string{".go", ".ts", ".tsx", ".mjs", ".js", ".sh", ".html", ".md"}

// sourceSkipDirs hold what the repository did not write: installed packages,
// build output, fuzz and test corpora.
var sourceSkipDirs = []string{".git", "node_modules", "dist", "testdata"}

// standardRE is what comes before a "§" that cites a standard: the
// standard's name, or its name and other sections of it ("RFC 6750 §2.1",
// "RFC 7518 §6.2.2, §6.3.2"), documents every reader can look up.
var standardRE = regexp.MustCompile(`\bRFC ?\d+ (§[\d.]+(, | and ))*$`)

// TestSourceCitesOnlyTheRepository is TestOnlyWhatTheReaderHas for the
// source: a comment cites a docs page, a file, a function or a test, or
// states the rule itself, never a document or tracker outside the
// repository. A "§" is a standard's section only right after the
// standard's name (standardRE).
// Files a VENDORED list names are someone else's, and this file names what
// it bans.
func TestSourceCitesOnlyTheRepository(t *testing.T) {
	banned := []struct {
		re  *regexp.Regexp
		why string
	}{
		{regexp.MustCompile(`\bSPEC\b`), "cites a specification the reader does not have"},
		{regexp.MustCompile(`§`), "cites a section of a document the reader does not have (a standard's section follows its name, as in RFC 6750 §2.1)"},
		{regexp.MustCompile(`(?i)\bthe seed\b|\bseeds?/|\bseed's\b`), "refers to the seed project, which the reader does not have"},
		{regexp.MustCompile(`(?i)\bissues?\s+#?\d+`), "cites an issue number the reader cannot look up"},
	}
	for _, rel := range sourceFiles(t) {
		p := readPage(t, rel)
		for i, l := range p.lines {
			for _, b := range banned {
				for _, at := range b.re.FindAllStringIndex(l, -1) {
					if l[at[0]:at[1]] == "§" && standardRE.MatchString(l[:at[0]]) {
						continue
					}
					if strings.HasPrefix(strings.ToLower(l[at[1]:]), " corpus") {
						continue // a fuzz test's seed corpus
					}
					t.Errorf("%s:%d: %q %s: cite a docs page, a file, a function or a test of the repository, or state the rule", rel, i+1, strings.TrimSpace(l[at[0]:at[1]]), b.why)
				}
			}
		}
	}
}

// sourceFiles returns the repository's own source files (not README.md, the
// guides, or vendored files), by their paths from the repository root.
func sourceFiles(t *testing.T) []string {
	t.Helper()
	root := ".."
	vendored := map[string]bool{}
	var files []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, root+string(filepath.Separator)))
		if d.IsDir() {
			if path != root && slices.Contains(sourceSkipDirs, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case d.Name() == "VENDORED":
			for _, name := range vendoredNames(t, path) {
				vendored[filepath.ToSlash(filepath.Join(filepath.Dir(rel), name))] = true
			}
		case rel == "README.md" || rel == "docs/docs_test.go" || (filepath.Dir(rel) == "docs" && filepath.Ext(rel) == ".md"):
		case d.Name() == "Makefile" || slices.Contains(sourceExts, filepath.Ext(rel)):
			files = append(files, rel)
		case filepath.Ext(rel) == "" && d.Type().IsRegular() && isScript(path):
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("read %d files: is the test run from docs/?", len(files))
	}
	var own []string
	for _, rel := range files {
		if !vendored[rel] {
			own = append(own, rel)
		}
	}
	return own
}

// A citation of a guide in source: docs/page.md, optionally with an
// #anchor or followed by the section's title in quotes.
var citationRE = regexp.MustCompile(`docs/([a-z0-9_-]+\.md)(?:#([a-z0-9-]+))?(?:,? "([^"]+)")?`)

// A comment marker that starts a line continuing a comment.
var commentLineRE = regexp.MustCompile(`\n[ \t]*(?://|#|\*)[ \t]*`)

// TestSourceCitationsExist checks that every guide a source file cites
// exists, with the section it names: code points readers at docs/, and a
// renamed section must not leave them looking for a title that is gone.
func TestSourceCitationsExist(t *testing.T) {
	sections := map[string]map[string]bool{} // page → titles and anchors
	for _, p := range pages(t) {
		set := map[string]bool{}
		for _, l := range p.lines {
			if title, ok := strings.CutPrefix(strings.TrimLeft(l, "#"), " "); ok && strings.HasPrefix(l, "#") {
				// Cited as read, without the code spans' backquotes.
				set[strings.ReplaceAll(title, "`", "")] = true
				set["#"+anchor(title)] = true
			}
		}
		sections[p.path] = set
	}
	cited := 0
	for _, rel := range sourceFiles(t) {
		if rel == "docs/docs_test.go" {
			continue
		}
		data, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		// A citation may run over two lines of a comment.
		text := commentLineRE.ReplaceAllString(string(data), " ")
		for _, m := range citationRE.FindAllStringSubmatch(text, -1) {
			cited++
			page := "docs/" + m[1]
			set, ok := sections[page]
			switch {
			case !ok:
				t.Errorf("%s cites %s, which does not exist", rel, page)
			case m[2] != "" && !set["#"+m[2]]:
				t.Errorf("%s cites %s#%s: no section has that anchor", rel, page, m[2])
			case m[3] != "" && !set[m[3]]:
				t.Errorf("%s cites %s, %q: no section has that title", rel, page, m[3])
			}
		}
	}
	t.Logf("%d citations of docs/ in source", cited)
	if cited < 50 {
		t.Errorf("found %d citations of docs/ in source: is the test run from docs/?", cited)
	}
}

// anchor is the #fragment a Markdown renderer gives a heading: lower case,
// punctuation dropped, spaces as hyphens.
func anchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// vendoredNames returns the files a VENDORED list names: the last field of
// each line that is not a comment, a name in the list's directory.
func vendoredNames(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		names = append(names, f[len(f)-1])
	}
	return names
}

// isScript reports whether the file at path starts with "#!".
func isScript(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 2)
	n, _ := f.Read(head)
	return string(head[:n]) == "#!"
}
