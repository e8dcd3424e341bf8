// Package policy compiles the per-tool allow expressions once, at load, and
// evaluates them per call over the caller's verified claims, the call's
// context and its input.
package policy

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"

	"github.com/toolgate/toolgate/internal/jsonread"
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
	what string // what errors call it: allow, approval, assignee
	prog *vm.Program
	// readsInput is whether the expression can see the input at all; when
	// it cannot, the input is neither converted nor held to Input's rules.
	readsInput bool
}

// Compile compiles an allow expression against Env; it must yield a bool.
func Compile(src string) (*Allow, error) {
	return compile(src, "allow", expr.AsBool())
}

// CompileWhen compiles an approval rule's condition: Compile's language,
// named "approval" in its errors.
func CompileWhen(src string) (*Allow, error) {
	return compile(src, "approval", expr.AsBool())
}

// CompileString compiles an expression against Env that yields a string
// (an approval's assignee); what names it in errors ("assignee").
func CompileString(src, what string) (*Allow, error) {
	return compile(src, what, expr.AsKind(reflect.String))
}

func compile(src, what string, kind expr.Option) (*Allow, error) {
	prog, err := expr.Compile(src, expr.Env(Env{}), kind)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", what, src, err)
	}
	a := &Allow{src: src, prog: prog, what: what}
	root := prog.Node()
	ast.Walk(&root, visitor(func(n *ast.Node) {
		// $env is the whole environment, so $env.input or $env["input"]
		// read the input without naming it.
		if id, ok := (*n).(*ast.IdentifierNode); ok && (id.Value == "input" || id.Value == "$env") {
			a.readsInput = true
		}
	}))
	return a, nil
}

type visitor func(*ast.Node)

func (v visitor) Visit(n *ast.Node) { v(n) }

// Source returns the expression as written.
func (a *Allow) Source() string { return a.src }

// Eval reports whether env is allowed. An expression that fails at run time
// (a missing claim used as a number, say) denies: policies fail closed.
func (a *Allow) Eval(env Env) (bool, error) {
	out, err := expr.Run(a.prog, env)
	if err != nil {
		return false, fmt.Errorf("%s %q: %w", a.what, a.src, err)
	}
	ok, _ := out.(bool)
	return ok, nil
}

// EvalString evaluates an expression compiled by CompileString.
func (a *Allow) EvalString(env Env) (string, error) {
	out, err := expr.Run(a.prog, env)
	if err != nil {
		return "", fmt.Errorf("%s %q: %w", a.what, a.src, err)
	}
	s, _ := out.(string)
	return s, nil
}

// Input returns a call's decoded input as the expression reads it (see
// Plain), or an empty map when the expression does not read the input. It
// fails, and the call must be denied, when the input holds a number the
// expression could only compare rounded.
func (a *Allow) Input(input any) (map[string]any, error) {
	if !a.readsInput || input == nil {
		return map[string]any{}, nil
	}
	v, err := Plain(input)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", a.what, a.src, err)
	}
	m, _ := v.(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

// InexactError says an input number has no exact value in an expression.
type InexactError struct {
	// Path is where the number stands, e.g. "input.items.0.amount".
	Path string
	// Number is the number's text, cut short when long.
	Number string
}

func (e *InexactError) Error() string {
	return fmt.Sprintf("%s: the number %s has no exact float64 value, so the policy denies rather than compare it rounded", e.Path, e.Number)
}

// Plain converts a call's decoded input, whose numbers are jsonread.Number,
// into what expressions compare, so that a policy judges the number the
// target receives (the input's own text, sent as written) and not a
// rounded neighbour of it. A number becomes a float64 when the float64 is
// that number, or reads back as it in its shortest text (0.1, 2.50, -0.0,
// 1e20, 2^53, 2^63); any other number fails with an *InexactError, and the
// policy denies: 100.0000000000000001 would be 100 to the policy but more
// than 100 to a target that reads decimals, 9007199254740993 would be
// 9007199254740992, and 1e400 or a 30-digit integer have no float64.
//
// Integers are not made ints, though expr compares ints exactly: expr's
// int arithmetic wraps silently, so "input.price * input.qty <= 1000"
// would let price 2^62 and qty 4 through as 0. Float arithmetic ends at
// +Inf instead, which compares greater than any limit.
func Plain(v any) (any, error) {
	return plain(v, []string{"input"})
}

func plain(v any, path []string) (any, error) {
	switch x := v.(type) {
	case jsonread.Number:
		if n, ok := exactNumber(string(x)); ok {
			return n, nil
		}
		text := string(x)
		if len(text) > 40 {
			text = text[:32] + "…"
		}
		return nil, &InexactError{Path: strings.Join(path, "."), Number: text}
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			p, err := plain(e, append(path, k))
			if err != nil {
				return nil, err
			}
			m[k] = p
		}
		return m, nil
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			p, err := plain(e, append(path, strconv.Itoa(i)))
			if err != nil {
				return nil, err
			}
			s[i] = p
		}
		return s, nil
	}
	return v, nil
}

// exactNumber returns the float64 whose value is the decimal number s, if
// there is one.
func exactNumber(s string) (any, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, false
	}
	want, ok := parseDecimal(s)
	if !ok {
		return nil, false
	}
	// s is f's own decimal when f's shortest text names the same number
	// (0.1, 2.50, 1e20): no other shortest text reads as f, so comparing
	// f compares s. A rounded s (100.0000000000000001) names another.
	if d, ok := parseDecimal(strconv.FormatFloat(f, 'e', -1, 64)); ok && d == want {
		return f, true
	}
	// f may also hold s exactly though it prints shorter: 2^63 is
	// 9223372036854775808 and prints 9.223372036854776e18. 767 digits
	// write any float64 out in full.
	if d, ok := parseDecimal(strconv.FormatFloat(f, 'e', 767, 64)); ok && d == want {
		return f, true
	}
	return nil, false
}

// decimalNumber is a decimal number written one way only: 0.digits × 10^exp,
// digits without leading or trailing zeros. Zero is the zero value.
type decimalNumber struct {
	neg    bool
	digits string
	exp    int
}

// parseDecimal reads a JSON number's text ("-12.50e+3"); ok is false for
// any other text (Inf, hex, underscores) or an exponent out of reach.
func parseDecimal(s string) (d decimalNumber, ok bool) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, expText := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, expText = s[:i], s[i+1:]
	}
	exp := 0
	if expText != "" {
		e, err := strconv.Atoi(expText)
		// A float64 spans about 10^±324; this bound only keeps the
		// arithmetic below from overflowing on absurd text.
		if err != nil || e > 1<<30 || e < -1<<30 {
			return d, false
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	if intPart == "" || strings.Trim(intPart, "0123456789") != "" || strings.Trim(frac, "0123456789") != "" {
		return d, false
	}
	all := intPart + frac
	trimmed := strings.TrimLeft(all, "0")
	if trimmed == "" {
		return decimalNumber{}, true
	}
	lead := len(all) - len(trimmed)
	if len(all) > 1<<30 {
		return d, false
	}
	return decimalNumber{neg: neg, digits: strings.TrimRight(trimmed, "0"), exp: len(intPart) + exp - lead}, true
}
