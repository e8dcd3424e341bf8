package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/manifest"
)

// TestOpenAPICommand: `toolgate openapi` prints the tools a document
// makes and what it skipped; with --json, a manifest that loads.
func TestOpenAPICommand(t *testing.T) {
	bin := toolgateBinary(t)
	doc, _ := filepath.Abs("../../internal/openapi/testdata/v31/api.yaml")
	out, err := exec.Command(bin, "openapi", doc, "--prefix", "it_").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, want := range []string{
		"it_put_item  PUT /items/{id}",
		"input cookie.session           → cookie session, required",
		"skipped POST /upload (upload): the request body is multipart/form-data, not JSON or a form",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}

	out, err = exec.Command(bin, "openapi", doc, "--component", "api", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := manifest.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	api, _ := dispatch.NewComponent("api", "http://127.0.0.1:1", nil)
	set, err := manifest.Compile([]manifest.Source{src}, map[string]*dispatch.Component{"api": api})
	if err != nil {
		t.Fatal(err)
	}
	if tool, ok := set.Lookup("put_item"); !ok || tool.Target.Spec.Operation == nil || len(tool.Target.Spec.Operation.Params) != 6 || len(tool.OutputSchema) == 0 {
		t.Errorf("the manifest's put_item: %+v", tool)
	}

	if out, err := exec.Command(bin, "openapi", doc, "--json").CombinedOutput(); err == nil || !strings.Contains(string(out), "give a component") {
		t.Errorf("--json without a target: %v %s", err, out)
	}
}
