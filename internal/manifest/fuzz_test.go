package manifest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/manifest"
)

// FuzzManifest loads a manifest from arbitrary bytes: it never panics, a
// manifest is either an error that names the source or a set of tools
// that each check and can be looked up.
func FuzzManifest(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.json")
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		`{"tools":[]}`,
		`{"tools":[{"name":"t","description":"d","input_schema":{"type":"object","properties":{"id":{"type":"string"}},"additionalProperties":false},"target":{"type":"app","component":"api","method":"GET","path":"/i/${input.id}"}}]}`,
		`{"tools":[{"name":"t","description":"d","input_schema":{"type":"object","$ref":"https://example.com/s.json"},"target":{"type":"kazzle","name":"t"}}]}`,
		`{"tools":[{"name":"t","description":"d","input_schema":{"type":"object"},"target":{"type":"url","method":"GET","url":"http://x.example/","result":"body."},"allow":"claims.x =="}]}`,
		`{"tools":[{"name":"t","description":"d","input_schema":{"type":"object","patternProperties":{"(":{}},"additionalProperties":false},"target":{"type":"app","component":"api","method":"POST","path":"/","body":"${input.a}"}}]}`,
	} {
		f.Add([]byte(s))
	}
	api, err := dispatch.NewComponent("api", "http://api.internal:8080", map[string]string{"TOKEN": "s3cret"})
	if err != nil {
		f.Fatal(err)
	}
	comps := map[string]*dispatch.Component{"api": api}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := manifest.Parse(data)
		if err != nil {
			return
		}
		set, err := manifest.Compile([]manifest.Source{{Name: "manifest fuzz.json", Tools: file.Tools}}, comps)
		if err != nil {
			if set != nil {
				t.Fatalf("Compile returned a set and the error %v", err)
			}
			if !strings.HasPrefix(err.Error(), "manifest fuzz.json: ") {
				t.Fatalf("error %q does not name the manifest", err)
			}
			return
		}
		if len(set.List()) != len(file.Tools) {
			t.Fatalf("%d tools declared, %d compiled", len(file.Tools), len(set.List()))
		}
		for _, c := range set.List() {
			if got, ok := set.Lookup(c.Name); !ok || got != c {
				t.Fatalf("tool %q is listed but not found", c.Name)
			}
			if c.Schema == nil || c.Target == nil || c.DisplayName == "" || (c.Allow != "") != (c.Policy != nil) {
				t.Fatalf("tool %q compiled as %+v", c.Name, c)
			}
			_ = c.ValidateInput(map[string]any{})
		}
	})
}
