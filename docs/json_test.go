package docs

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The JSON library and the names it goes by (architecture.md, "JSON is
// go-json-experiment").
const (
	jsonPath     = "github.com/go-json-experiment/json"
	jsontextPath = "github.com/go-json-experiment/json/jsontext"
	legacyPath   = "github.com/toolgate/toolgate/internal/jsonread/legacyjson"
)

// stdJSONAt is where encoding/json may be imported: the alias of its
// Number type, which the JSON Schema validator needs, and the tests' copy
// of it, which holds the lenient readers to what it did.
var stdJSONAt = []string{
	"internal/jsonread/number.go",
	"internal/jsonread/legacyjson/legacyjson.go",
}

// TestOneJSONLibrary keeps one JSON library under one name in every Go
// file: json is go-json-experiment's, jsontext its jsontext, and
// encoding/json is imported only where stdJSONAt says.
func TestOneJSONLibrary(t *testing.T) {
	root := ".."
	files := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, root+string(filepath.Separator)))
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") {
			return nil
		}
		files++
		for _, problem := range jsonImportProblems(t, p, rel) {
			t.Errorf("%s: %s", rel, problem)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d Go files: the walk missed the tree", files)
	}
}

// jsonImportProblems lists what is wrong with the JSON imports of the Go
// file at p (rel from the repository's root).
func jsonImportProblems(t *testing.T, p, rel string) []string {
	t.Helper()
	src, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), p, src, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	for _, spec := range f.Imports {
		ip, _ := strconv.Unquote(spec.Path.Value)
		name := path.Base(ip)
		if spec.Name != nil {
			name = spec.Name.Name
		}
		switch {
		case ip == "encoding/json" && !containsString(stdJSONAt, rel):
			problems = append(problems, `imports encoding/json: use json (`+jsonPath+`); a Number is jsonread.Number`)
		case ip == jsonPath+"/v1":
			problems = append(problems, "imports "+ip+": read leniently with jsonread.Lenient or jsonread.UnmarshalAnyCase")
		case strings.HasPrefix(ip, "encoding/json/"):
			problems = append(problems, "imports "+ip+": use "+jsonPath)
		case ip == jsonPath && name != "json":
			problems = append(problems, "imports "+ip+" as "+name+": its name is json")
		case ip == jsontextPath && name != "jsontext":
			problems = append(problems, "imports "+ip+" as "+name+": its name is jsontext")
		case ip == legacyPath && !strings.HasSuffix(rel, "_test.go"):
			problems = append(problems, "imports legacyjson, which is for tests alone")
		}
	}
	return problems
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// The guard must catch each kind of import it exists for.
func TestJSONImportProblems(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		rel, imports string
		want         string
	}{
		{"x/a.go", `"encoding/json"`, "imports encoding/json"},
		{"internal/jsonread/number.go", `stdjson "encoding/json"`, ""},
		{"x/b.go", `jsonv1 "` + jsonPath + `/v1"`, "/v1"},
		{"x/c.go", `jsonv2 "` + jsonPath + `"`, "as jsonv2"},
		{"x/d.go", `"` + jsonPath + `"`, ""},
		{"x/e.go", `js "` + jsontextPath + `"`, "as js"},
		{"x/f.go", `"encoding/json/jsontext"`, "imports encoding/json/jsontext"},
		{"x/g.go", `"` + legacyPath + `"`, "for tests alone"},
		{"x/g_test.go", `"` + legacyPath + `"`, ""},
	} {
		p := filepath.Join(dir, filepath.Base(tt.rel))
		if err := os.WriteFile(p, []byte("package x\n\nimport "+tt.imports+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		got := strings.Join(jsonImportProblems(t, p, tt.rel), "; ")
		if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
			t.Errorf("%s importing %s: %q, want %q", tt.rel, tt.imports, got, tt.want)
		}
	}
}
