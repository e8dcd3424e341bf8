// Package policy compiles the per-tool allow expressions once, at load, and
// evaluates them per call over the caller's verified claims, the call's
// context and its input.
package policy

import (
	"encoding/json"
	"fmt"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"
)

// Context is the call's context as an expression sees it.
type Context struct {
	Source   string `expr:"source"`
	ThreadID string `expr:"threadId"`
}

// Env is what an allow expression may read.
type Env struct {
	// Claims are the caller token's claims (empty without callers).
	Claims map[string]any `expr:"claims"`
	User   string         `expr:"user"`
	// Install is the caller's installation.
	Install string         `expr:"install"`
	Tool    string         `expr:"tool"`
	Context Context        `expr:"context"`
	Input   map[string]any `expr:"input"`
}

// Allow is a compiled allow expression.
type Allow struct {
	src  string
	prog *vm.Program
}

// Compile compiles an allow expression against Env; it must yield a bool.
func Compile(src string) (*Allow, error) {
	prog, err := expr.Compile(src, expr.Env(Env{}), expr.AsBool())
	if err != nil {
		return nil, fmt.Errorf("allow %q: %w", src, err)
	}
	return &Allow{src: src, prog: prog}, nil
}

// Source returns the expression as written.
func (a *Allow) Source() string { return a.src }

// Eval reports whether env is allowed. An expression that fails at run time
// (a missing claim used as a number, say) denies: policies fail closed.
func (a *Allow) Eval(env Env) (bool, error) {
	out, err := expr.Run(a.prog, env)
	if err != nil {
		return false, fmt.Errorf("allow %q: %w", a.src, err)
	}
	ok, _ := out.(bool)
	return ok, nil
}

// Plain converts decoded JSON that holds json.Number values into the
// float64 numbers expressions compare with.
func Plain(v any) any {
	switch x := v.(type) {
	case json.Number:
		if f, err := x.Float64(); err == nil {
			return f
		}
		return x.String()
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = Plain(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = Plain(e)
		}
		return s
	}
	return v
}
