package openapi

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/result"
)

// Operation is one operation of a document as a tool calls it.
type Operation struct {
	// ID is the operationId; Tool the tool's name made of it.
	ID, Tool string
	// Method and Path are the operation's, the path with {name} where its
	// path parameters go.
	Method, Path string
	// Summary and Description are the operation's.
	Summary, Description string
	// Inputs say where each parameter's value is in the input and how it
	// is sent.
	Inputs []Input
	// Body is the request body, if the operation takes one.
	Body *Body
	// InputSchema is the tool's input schema (JSON Schema 2020-12).
	InputSchema jsontext.Value
	// OutputSchema is the schema of the operation's JSON answer (its
	// first 2xx response with one), nil when it declares none; an answer
	// that is not an object is the property "result" of the structured
	// content (OutputWrapped).
	OutputSchema  jsontext.Value
	OutputWrapped bool
	// ReadOnly and Idempotent are the hints its method gives, or
	// x-toolgate-annotations.
	ReadOnly, Idempotent bool
	Destructive          *bool
}

// Input is a parameter and where the tool's input holds its value: the
// property Name, within the group property Group when names clash ("" for
// the top level).
type Input struct {
	dispatch.Param
	Group, Property string
	Required        bool
}

// Body is an operation's request body.
type Body struct {
	// MediaType is application/json (or a +json type) or
	// application/x-www-form-urlencoded.
	MediaType string
	Required  bool
	// Group and Property say where the input holds it: "body" at the top
	// level, or the group "body".
	Property string
}

// Options say which operations become tools and how they are named.
type Options struct {
	// Operations are the operationIds to take; empty, every operation
	// with an operationId that is not deprecated.
	Operations []string
	// Prefix goes before each tool's name.
	Prefix string
}

// Skipped is an operation that makes no tool, and why.
type Skipped struct {
	Method, Path, ID, Why string
}

// Operations are the tools a document's operations make, in the order of
// their paths and methods, and the operations skipped, with the reason.
// Two operations whose tools would have the same name, or an operation
// named in opts that the document lacks, are an error naming them.
func Operations(doc *openapi3.T, opts Options) ([]Operation, []Skipped, error) {
	wanted := map[string]bool{}
	for _, id := range opts.Operations {
		wanted[id] = true
	}
	defs := newDefs(doc)
	var ops []Operation
	var skipped []Skipped
	byTool := map[string]string{}
	seen := map[string]bool{}
	paths := doc.Paths.InMatchingOrder()
	sort.Strings(paths)
	for _, path := range paths {
		item := doc.Paths.Value(path)
		for _, method := range methods {
			op := item.GetOperation(method)
			if op == nil {
				continue
			}
			skip := func(why string) {
				skipped = append(skipped, Skipped{Method: method, Path: path, ID: op.OperationID, Why: why})
			}
			switch {
			case op.OperationID == "":
				skip("no operationId")
				continue
			case len(wanted) > 0 && !wanted[op.OperationID]:
				skip("not listed in operations")
				continue
			case op.Deprecated && !wanted[op.OperationID]:
				skip("deprecated (list it in operations to take it)")
				continue
			}
			seen[op.OperationID] = true
			o, err := operation(defs, method, path, item, op, opts.Prefix)
			if err != nil {
				skip(err.Error())
				continue
			}
			label := method + " " + path
			if prev, dup := byTool[o.Tool]; dup {
				return nil, nil, fmt.Errorf("operations %s and %s both make the tool %q", prev, label, o.Tool)
			}
			byTool[o.Tool] = label
			ops = append(ops, o)
		}
	}
	for _, id := range opts.Operations {
		if !seen[id] {
			return nil, nil, fmt.Errorf("operation %q is not in the document", id)
		}
	}
	return ops, skipped, nil
}

var methods = []string{"GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE"}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// ToolName is an operationId made a tool name: what a model provider
// takes, [a-zA-Z0-9_-]{1,64}, the prefix put before it.
func ToolName(prefix, id string) string {
	name := prefix + unsafeName.ReplaceAllString(id, "_")
	if len(name) > 64 {
		name = name[:64]
	}
	return name
}

func operation(defs *defs, method, path string, item *openapi3.PathItem, op *openapi3.Operation, prefix string) (Operation, error) {
	o := Operation{
		ID: op.OperationID, Tool: ToolName(prefix, op.OperationID), Method: method, Path: path,
		Summary: op.Summary, Description: op.Description,
	}
	o.ReadOnly = method == "GET" || method == "HEAD"
	o.Idempotent = o.ReadOnly || method == "PUT" || method == "DELETE" || method == "OPTIONS"
	if err := annotations(op, &o); err != nil {
		return o, err
	}

	// Parameters: the path item's, overridden by the operation's of the
	// same name and location.
	var params []*openapi3.Parameter
	index := map[string]int{}
	for _, list := range []openapi3.Parameters{item.Parameters, op.Parameters} {
		for _, ref := range list {
			p := ref.Value
			if p == nil {
				continue
			}
			key := p.In + "\x00" + p.Name
			if i, ok := index[key]; ok {
				params[i] = p
				continue
			}
			index[key] = len(params)
			params = append(params, p)
		}
	}
	schemas := map[string]map[string]any{} // group → property → schema
	required := map[string][]string{}
	names := map[string]int{}
	for _, p := range params {
		if p.In == "header" && slices.Contains([]string{"accept", "content-type", "authorization"}, strings.ToLower(p.Name)) {
			// The specification: such header parameters are ignored.
			continue
		}
		if p.Schema == nil {
			return o, fmt.Errorf("parameter %s %q: only a schema parameter is taken (content is not)", p.In, p.Name)
		}
		in := Input{Param: dispatch.Param{Name: p.Name, In: p.In, Style: p.Style, Explode: p.Explode, AllowReserved: p.AllowReserved}, Required: p.Required || p.In == "path"}
		if err := in.Check(); err != nil {
			return o, fmt.Errorf("parameter %s %q: %v", p.In, p.Name, err)
		}
		s, err := defs.schema(p.Schema)
		if err != nil {
			return o, fmt.Errorf("parameter %s %q: %v", p.In, p.Name, err)
		}
		if p.Description != "" {
			if m, ok := s.(map[string]any); ok {
				if _, has := m["description"]; !has {
					m["description"] = p.Description
				}
			}
		}
		if schemas[p.In] == nil {
			schemas[p.In] = map[string]any{}
		}
		schemas[p.In][p.Name] = s
		if in.Required {
			required[p.In] = append(required[p.In], p.Name)
		}
		names[p.Name]++
		o.Inputs = append(o.Inputs, in)
	}

	var body any
	if rb := op.RequestBody; rb != nil && rb.Value != nil {
		mt, media := bodyMedia(rb.Value.Content)
		if media == nil {
			return o, fmt.Errorf("the request body is %s, not JSON or a form", mediaTypes(rb.Value.Content))
		}
		o.Body = &Body{MediaType: mt, Required: rb.Value.Required, Property: "body"}
		body = map[string]any{}
		if media.Schema != nil {
			var err error
			if body, err = defs.schema(media.Schema); err != nil {
				return o, fmt.Errorf("request body: %v", err)
			}
		}
		names["body"]++
	}

	// Grouped when a name is used twice (path and query both have id, or
	// a parameter is named body): each location is then a property of
	// its own, {path: {...}, query: {...}, body: ...}.
	grouped := false
	for _, n := range names {
		grouped = grouped || n > 1
	}
	root := map[string]any{"type": "object", "additionalProperties": false}
	props := map[string]any{}
	var req []string
	for _, loc := range []string{"path", "query", "header", "cookie"} {
		if len(schemas[loc]) == 0 {
			continue
		}
		if grouped {
			g := map[string]any{"type": "object", "properties": schemas[loc], "additionalProperties": false}
			if len(required[loc]) > 0 {
				g["required"] = required[loc]
				req = append(req, loc)
			}
			props[loc] = g
			continue
		}
		for k, v := range schemas[loc] {
			props[k] = v
		}
		req = append(req, required[loc]...)
	}
	for i := range o.Inputs {
		in := &o.Inputs[i]
		in.Property = in.Name
		if grouped {
			in.Group = in.In
		}
	}
	if o.Body != nil {
		props["body"] = body
		if o.Body.Required {
			req = append(req, "body")
		}
	}
	root["properties"] = props
	if len(req) > 0 {
		sort.Strings(req)
		root["required"] = req
	}
	if len(defs.used) > 0 {
		root["$defs"] = defs.take()
	}
	var err error
	if o.InputSchema, err = json.Marshal(root, json.Deterministic(true)); err != nil {
		return o, err
	}
	if o.OutputSchema, o.OutputWrapped, err = defs.output(op); err != nil {
		return o, fmt.Errorf("response: %v", err)
	}
	return o, nil
}

// annotations reads x-toolgate-annotations, which overrides the method's
// hints: {"readOnlyHint", "idempotentHint", "destructiveHint"}.
func annotations(op *openapi3.Operation, o *Operation) error {
	raw, ok := op.Extensions["x-toolgate-annotations"]
	if !ok {
		return nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return fmt.Errorf("x-toolgate-annotations is not an object")
	}
	for k, v := range m {
		b, ok := v.(bool)
		if !ok {
			return fmt.Errorf("x-toolgate-annotations: %s is not a boolean", k)
		}
		switch k {
		case "readOnlyHint":
			o.ReadOnly = b
		case "idempotentHint":
			o.Idempotent = b
		case "destructiveHint":
			o.Destructive = &b
		default:
			return fmt.Errorf("x-toolgate-annotations: unknown hint %q", k)
		}
	}
	return nil
}

// bodyMedia picks the media type a body is sent as: JSON first, then a
// form.
func bodyMedia(c openapi3.Content) (string, *openapi3.MediaType) {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if result.IsJSON(k) {
			return k, c[k]
		}
	}
	if m, ok := c["application/x-www-form-urlencoded"]; ok {
		return "application/x-www-form-urlencoded", m
	}
	return "", nil
}

func mediaTypes(c openapi3.Content) string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}
