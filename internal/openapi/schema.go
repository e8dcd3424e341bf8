package openapi

import (
	"errors"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/result"
)

// componentRef starts a $ref to a schema of the document's components,
// which every $ref is once Load has made other files' schemas components.
const componentRef = "#/components/schemas/"

// defs converts a document's schemas into self-contained JSON Schema
// 2020-12: each $ref to a component becomes one to the schema's own
// $defs, which hold every component it reaches (recursive ones too). An
// OpenAPI 3.0 schema, a dialect of its own, is written as 2020-12 says
// the same thing (nullable, boolean exclusiveMinimum/Maximum, example);
// a 3.1 schema is 2020-12 already and kept as it is.
type defs struct {
	doc  *openapi3.T
	v30  bool
	done map[string]any  // converted components, by name
	used map[string]bool // the components the schema being built refers to
}

func newDefs(doc *openapi3.T) *defs {
	return &defs{doc: doc, v30: !doc.IsOpenAPI31OrLater(), done: map[string]any{}, used: map[string]bool{}}
}

// schema converts ref, noting the components it refers to.
func (d *defs) schema(ref *openapi3.SchemaRef) (any, error) {
	var raw []byte
	var err error
	if ref.Ref != "" && strings.HasPrefix(ref.Ref, componentRef) {
		raw, err = json.Marshal(ref)
	} else if ref.Value != nil {
		raw, err = json.Marshal(ref.Value)
	} else {
		return nil, errors.New("a schema that did not resolve: " + ref.Ref)
	}
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return d.rewrite(v), nil
}

// rewrite converts one schema, and the schemas within it.
func (d *defs) rewrite(v any) any {
	switch v := v.(type) {
	case []any:
		for i := range v {
			v[i] = d.rewrite(v[i])
		}
		return v
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok && strings.HasPrefix(ref, componentRef) {
			name := unescapePointer(strings.TrimPrefix(ref, componentRef))
			d.used[name] = true
			v["$ref"] = "#/$defs/" + escapePointer(name)
		}
		for k, sub := range v {
			if k == "enum" || k == "const" || k == "default" || k == "examples" || k == "example" {
				continue // values, not schemas
			}
			v[k] = d.rewrite(sub)
		}
		if d.v30 {
			from30(v)
		}
		return v
	}
	return v
}

// from30 writes an OpenAPI 3.0 schema object as JSON Schema 2020-12.
func from30(m map[string]any) {
	if n, ok := m["nullable"].(bool); ok {
		delete(m, "nullable")
		if t, isString := m["type"].(string); n && isString {
			m["type"] = []any{t, "null"}
		}
	}
	for _, bound := range [][2]string{{"exclusiveMinimum", "minimum"}, {"exclusiveMaximum", "maximum"}} {
		if ex, ok := m[bound[0]].(bool); ok {
			delete(m, bound[0])
			if limit, has := m[bound[1]]; ex && has {
				m[bound[0]] = limit
				delete(m, bound[1])
			}
		}
	}
	if ex, ok := m["example"]; ok {
		delete(m, "example")
		if _, has := m["examples"]; !has {
			m["examples"] = []any{ex}
		}
	}
	for _, k := range []string{"discriminator", "xml", "externalDocs"} {
		delete(m, k)
	}
}

// take returns the $defs of the schema built since the last take: every
// component it reaches.
func (d *defs) take() map[string]any {
	out := map[string]any{}
	for len(d.used) > 0 {
		names := make([]string, 0, len(d.used))
		for n := range d.used {
			names = append(names, n)
		}
		sort.Strings(names)
		clear(d.used)
		for _, n := range names {
			if _, ok := out[n]; ok {
				continue
			}
			if _, ok := d.done[n]; !ok {
				d.done[n] = map[string]any{} // a recursive component refers to itself
				if ref := d.doc.Components.Schemas[n]; ref != nil && ref.Value != nil {
					if s, err := d.schema(&openapi3.SchemaRef{Value: ref.Value}); err == nil {
						d.done[n] = s
					}
				}
			} else {
				// Converted before: what it refers to is needed again.
				d.rewriteRefs(d.done[n])
			}
			out[n] = d.done[n]
		}
	}
	return out
}

// rewriteRefs notes the components a converted schema refers to.
func (d *defs) rewriteRefs(v any) {
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			d.rewriteRefs(e)
		}
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok && strings.HasPrefix(ref, "#/$defs/") {
			d.used[unescapePointer(strings.TrimPrefix(ref, "#/$defs/"))] = true
		}
		for k, e := range v {
			if k != "enum" && k != "const" && k != "default" && k != "examples" {
				d.rewriteRefs(e)
			}
		}
	}
}

// output is the schema of the operation's JSON answer: that of its first
// 2xx response with a JSON one (200 before 201, 2XX last), as an object:
// an answer that is not one is the property "result" of the object the
// tool answers.
func (d *defs) output(op *openapi3.Operation) (schema jsontext.Value, wrapped bool, err error) {
	if op.Responses == nil {
		return nil, false, nil
	}
	codes := make([]string, 0)
	for code := range op.Responses.Map() {
		if strings.HasPrefix(code, "2") {
			codes = append(codes, code)
		}
	}
	sort.Strings(codes) // "200" < "201" < "2XX"
	for _, code := range codes {
		r := op.Responses.Value(code)
		if r == nil || r.Value == nil {
			continue
		}
		for mt, media := range r.Value.Content {
			if !result.IsJSON(mt) || media.Schema == nil {
				continue
			}
			s, err := d.schema(media.Schema)
			if err != nil {
				return nil, false, err
			}
			if !isObject(s, d) {
				s, wrapped = map[string]any{"type": "object", "properties": map[string]any{"result": s}, "required": []any{"result"}}, true
			}
			m := s.(map[string]any)
			// An object by its $ref says so at the top too, as MCP asks of
			// an output schema.
			m["type"] = "object"
			if len(d.used) > 0 {
				m["$defs"] = d.take()
			}
			schema, err = json.Marshal(m, json.Deterministic(true))
			return schema, wrapped, err
		}
	}
	return nil, false, nil
}

// isObject reports whether a converted schema is surely of objects.
func isObject(s any, d *defs) bool {
	m, ok := s.(map[string]any)
	if !ok {
		return false
	}
	if ref, ok := m["$ref"].(string); ok && len(m) == 1 {
		name := unescapePointer(strings.TrimPrefix(ref, "#/$defs/"))
		if c := d.doc.Components.Schemas[name]; c != nil && c.Value != nil && c.Value.Type != nil {
			return c.Value.Type.Is("object")
		}
		return false
	}
	return m["type"] == "object"
}

func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

func unescapePointer(s string) string {
	return strings.NewReplacer("~1", "/", "~0", "~").Replace(s)
}
