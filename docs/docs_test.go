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
