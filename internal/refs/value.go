package refs

import (
	"errors"
	"fmt"
	"sort"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/jsonread"
)

// Value is a compiled JSON document (a target's body) whose strings may hold
// references. A string that is exactly one reference takes the referenced
// value with its JSON type; a reference inside a longer string is spliced in
// as text.
type Value struct {
	root node
	refs []Ref
}

type node interface {
	resolve(s Scope) (any, error)
}

// literal is a subtree without references, kept as decoded.
type literal struct{ v any }

func (n literal) resolve(Scope) (any, error) { return n.v, nil }

type single struct{ ref Ref }

func (n single) resolve(s Scope) (any, error) { return n.ref.Resolve(s) }

type text struct{ t *Template }

func (n text) resolve(s Scope) (any, error) { return n.t.Expand(s, nil) }

type object struct {
	keys  []string
	nodes []node
}

func (n object) resolve(s Scope) (any, error) {
	m := make(map[string]any, len(n.keys))
	for i, k := range n.keys {
		v, err := n.nodes[i].resolve(s)
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
	return m, nil
}

type array []node

func (n array) resolve(s Scope) (any, error) {
	out := make([]any, len(n))
	for i, c := range n {
		v, err := c.resolve(s)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// ParseJSON compiles a raw JSON document. Numbers keep their exact text.
func ParseJSON(raw []byte) (*Value, error) {
	var v any
	err := jsonread.One(raw, func(d *jsontext.Decoder) (err error) {
		v, err = jsonread.Value(d)
		return err
	}, jsonread.Lenient)
	if errors.Is(err, jsonread.ErrTrailing) {
		return nil, fmt.Errorf("invalid JSON: trailing data after the value")
	}
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	return Compile(v)
}

// Compile compiles a decoded JSON value.
func Compile(v any) (*Value, error) {
	val := &Value{}
	n, err := val.compile(v)
	if err != nil {
		return nil, err
	}
	val.root = n
	return val, nil
}

func (val *Value) compile(v any) (node, error) {
	switch x := v.(type) {
	case string:
		t, err := Parse(x)
		if err != nil {
			return nil, err
		}
		val.refs = append(val.refs, t.Refs()...)
		if lit, ok := t.Literal(); ok {
			return literal{lit}, nil
		}
		if r, ok := t.Single(); ok {
			return single{r}, nil
		}
		return text{t}, nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		obj := object{keys: keys, nodes: make([]node, len(keys))}
		allLit := true
		for i, k := range keys {
			n, err := val.compile(x[k])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			obj.nodes[i] = n
			_, isLit := n.(literal)
			allLit = allLit && isLit
		}
		if allLit {
			return literal{unwrapObject(obj)}, nil
		}
		return obj, nil
	case []any:
		arr := make(array, len(x))
		allLit := true
		for i, e := range x {
			n, err := val.compile(e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			arr[i] = n
			_, isLit := n.(literal)
			allLit = allLit && isLit
		}
		if allLit {
			out := make([]any, len(arr))
			for i, n := range arr {
				out[i] = n.(literal).v
			}
			return literal{out}, nil
		}
		return arr, nil
	default:
		return literal{x}, nil
	}
}

func unwrapObject(o object) map[string]any {
	m := make(map[string]any, len(o.keys))
	for i, k := range o.keys {
		m[k] = o.nodes[i].(literal).v
	}
	return m
}

// Refs lists every reference in the document.
func (val *Value) Refs() []Ref { return val.refs }

// Resolve returns the document with every reference resolved. Literal
// subtrees are shared between calls and must not be modified.
func (val *Value) Resolve(s Scope) (any, error) { return val.root.resolve(s) }

// ResolveJSON resolves the document and encodes it as compact JSON.
func (val *Value) ResolveJSON(s Scope) ([]byte, error) {
	v, err := val.Resolve(s)
	if err != nil {
		return nil, err
	}
	return compactJSON(v)
}
