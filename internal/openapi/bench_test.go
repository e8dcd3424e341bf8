package openapi

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkLoad500 loads a document of 500 operations (250 paths, a
// shared component each references) and makes its tools: what a config
// load costs.
func BenchmarkLoad500(b *testing.B) {
	var doc strings.Builder
	doc.WriteString("openapi: \"3.0.3\"\ninfo: {title: big, version: \"1\"}\npaths:\n")
	for i := range 250 {
		fmt.Fprintf(&doc, `  /things%[1]d/{id}:
    get:
      operationId: getThing%[1]d
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
        - {name: tags, in: query, schema: {type: array, items: {type: string}}}
      responses: {"200": {description: ok, content: {application/json: {schema: {$ref: "#/components/schemas/Thing"}}}}}
    put:
      operationId: putThing%[1]d
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
      requestBody: {required: true, content: {application/json: {schema: {$ref: "#/components/schemas/Thing"}}}}
      responses: {"200": {description: ok}}
`, i)
	}
	doc.WriteString(`components:
  schemas:
    Thing:
      type: object
      required: [name]
      properties:
        name: {type: string, nullable: true}
        size: {type: integer, minimum: 0, exclusiveMinimum: true}
        parts: {type: array, items: {$ref: "#/components/schemas/Thing"}}
`)
	path := filepath.Join(b.TempDir(), "big.yaml")
	if err := os.WriteFile(path, []byte(doc.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		d, err := Load(context.Background(), path)
		if err != nil {
			b.Fatal(err)
		}
		ops, _, err := Operations(d, Options{})
		if err != nil || len(ops) != 500 {
			b.Fatalf("%d operations, %v", len(ops), err)
		}
	}
}
