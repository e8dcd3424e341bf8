package dispatch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/refs"
	"github.com/toolgate/toolgate/internal/result"
)

// Operation is how an app or url target made from an OpenAPI operation
// sends its input: each parameter where the operation says, serialized by
// its style, and the body from its input property. The target's path (or
// url) holds {name} where each path parameter goes; a parameter the input
// does not hold is not sent (the input schema says which are required).
type Operation struct {
	Params []OperationParam `json:"params,omitempty"`
	Body   *OperationBody   `json:"body,omitempty"`
	// Output says whether the answer's JSON is the tool's structured
	// content (the operation declares its schema), and how.
	Output result.Output `json:"output,omitempty"`
}

// OperationParam is a parameter of an operation and where the input holds
// its value: the property Name, within the property Group if set.
type OperationParam struct {
	Name          string `json:"name"`
	In            string `json:"in"`
	Style         string `json:"style,omitempty"`
	Explode       *bool  `json:"explode,omitempty"`
	AllowReserved bool   `json:"allowReserved,omitzero"`
	Group         string `json:"group,omitempty"`
}

// OperationBody is an operation's request body: the input property that
// holds it (within Group if set) and how it is sent.
type OperationBody struct {
	// MediaType is application/json (or a +json type) or
	// application/x-www-form-urlencoded.
	MediaType string `json:"mediaType"`
	Property  string `json:"property"`
	Group     string `json:"group,omitempty"`
}

// operation is a compiled Operation.
type operation struct {
	// parts are the path template's literal text around its slots;
	// slots[i] is the index in params of the path parameter between
	// parts[i] and parts[i+1].
	parts  []string
	slots  []int
	params []Param
	where  []OperationParam
	body   *OperationBody
}

// compileOperation checks t.Spec.Operation against the path or URL
// template (base is the component's base URL, "" for a url target) and
// compiles it; the template's other references are not read.
func (t *Target) compileOperation(template, base string) error {
	s := t.Spec
	kind := s.Type
	if s.Query != nil || s.Body != nil {
		return fmt.Errorf("%s target: an operation's target takes its query and body from the operation", kind)
	}
	if base != "" && !strings.HasPrefix(template, "/") {
		return fmt.Errorf("%s target: path %q must start with /", kind, template)
	}
	op := &operation{body: s.Operation.Body}
	paths := map[string]int{}
	for i, p := range s.Operation.Params {
		param := Param{Name: p.Name, In: p.In, Style: p.Style, Explode: p.Explode, AllowReserved: p.AllowReserved}
		if err := param.Check(); err != nil {
			return fmt.Errorf("%s target: operation: %v", kind, err)
		}
		if p.In == "path" {
			paths[p.Name] = i
		}
		op.params = append(op.params, param)
		op.where = append(op.where, p)
	}
	if b := op.body; b != nil {
		if b.Property == "" || !result.IsJSON(b.MediaType) && b.MediaType != "application/x-www-form-urlencoded" {
			return fmt.Errorf("%s target: operation: the body needs a property and a JSON or form media type", kind)
		}
	}
	// The template: literal text and {name} slots.
	rest := template
	used := map[string]bool{}
	for {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			op.parts = append(op.parts, rest)
			break
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return fmt.Errorf("%s target: %q: a { without its }", kind, template)
		}
		name := rest[i+1 : i+j]
		idx, ok := paths[name]
		if !ok {
			return fmt.Errorf("%s target: %q: {%s} is no path parameter of the operation", kind, template, name)
		}
		used[name] = true
		op.parts = append(op.parts, rest[:i])
		op.slots = append(op.slots, idx)
		rest = rest[i+j+1:]
	}
	for name := range paths {
		if !used[name] {
			return fmt.Errorf("%s target: %q: path parameter %s has no {%s}", kind, template, name, name)
		}
	}
	skeleton := base + strings.Join(op.parts, "x")
	u, err := url.Parse(skeleton)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" || u.RawQuery != "" {
		return fmt.Errorf("%s target: %q must be an absolute http(s) URL (or a path on the component) with no query or fragment", kind, template)
	}
	if base == "" && len(op.slots) > 0 {
		// The origin is the author's, as in every url target.
		rest, ok := strings.CutPrefix(op.parts[0], u.Scheme+"://")
		if !ok || !strings.Contains(rest, "/") {
			return fmt.Errorf("%s target: %q: a path parameter may not fill the scheme, host or port", kind, template)
		}
	}
	if err := checkPathShape(u.EscapedPath()); err != nil {
		return fmt.Errorf("%s target: %q: %w", kind, template, err)
	}
	op.parts[0] = base + op.parts[0]
	t.op = op
	return nil
}

// operationRequest builds the request of an operation's target.
func (t *Target) operationRequest(ctx context.Context, scope refs.Scope) (*http.Request, error) {
	op := t.op
	in, _ := scope.Input.(map[string]any)
	value := func(group, name string) (any, bool) {
		m := in
		if group != "" {
			m, _ = in[group].(map[string]any)
		}
		v, ok := m[name]
		return v, ok && v != nil
	}
	encoded := make([]*Encoded, len(op.params))
	for i, p := range op.params {
		v, ok := value(op.where[i].Group, p.Name)
		if !ok {
			continue
		}
		e, err := p.Encode(v)
		if err != nil {
			return nil, err
		}
		encoded[i] = &e
	}
	var raw strings.Builder
	raw.WriteString(op.parts[0])
	for i, slot := range op.slots {
		e := encoded[slot]
		if e == nil {
			return nil, fmt.Errorf("path parameter %s has no value", op.params[slot].Name)
		}
		raw.WriteString(e.Path)
		raw.WriteString(op.parts[i+1])
	}
	var query, cookies []string
	for i, e := range encoded {
		if e == nil {
			continue
		}
		switch op.params[i].In {
		case "query":
			query = append(query, e.Pairs...)
		case "cookie":
			cookies = append(cookies, e.Pairs...)
		}
	}
	if len(query) > 0 {
		raw.WriteString("?" + strings.Join(query, "&"))
	}
	var body io.Reader
	contentType := ""
	if b := op.body; b != nil {
		if v, ok := value(b.Group, b.Property); ok {
			data, ct, err := encodeBody(b.MediaType, v)
			if err != nil {
				return nil, err
			}
			body, contentType = bytes.NewReader(data), ct
		}
	}
	if t.socket != nil {
		ctx = withSocket(ctx, t.socket)
	}
	req, err := http.NewRequestWithContext(ctx, t.Spec.Method, raw.String(), body)
	if err != nil {
		return nil, fmt.Errorf("the resolved URL does not parse: %v", err)
	}
	// A path value serialized into a whole segment may still be . or ..,
	// which would name another resource: refused, as every path
	// reference's is.
	for seg := range strings.SplitSeq(req.URL.EscapedPath(), "/") {
		if isDotSegment(seg) {
			return nil, fmt.Errorf("a path parameter of %s would be a dot segment", t.Spec.Path+t.Spec.URL)
		}
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i, e := range encoded {
		if e != nil && op.params[i].In == "header" {
			req.Header.Set(op.params[i].Name, e.Header)
		}
	}
	if len(cookies) > 0 {
		req.Header.Set("Cookie", strings.Join(cookies, "; "))
	}
	if err := t.setHeaders(req, scope); err != nil {
		return nil, err
	}
	return req, nil
}

// encodeBody writes a body value as its media type says.
func encodeBody(mediaType string, v any) ([]byte, string, error) {
	if result.IsJSON(mediaType) {
		b, err := json.Marshal(v, jsonread.Legacy)
		return b, mediaType, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, "", fmt.Errorf("a form body must be an object")
	}
	form := url.Values{}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		items, isList := m[k].([]any)
		if !isList {
			items = []any{m[k]}
		}
		for _, item := range items {
			if item == nil {
				continue
			}
			s, err := text(item)
			if err != nil {
				return nil, "", fmt.Errorf("form field %s: %v", k, err)
			}
			form.Add(k, s)
		}
	}
	return []byte(form.Encode()), "application/x-www-form-urlencoded", nil
}
