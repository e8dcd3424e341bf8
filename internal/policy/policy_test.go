package policy_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/policy"
)

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"syntax error", `user ==`, "unexpected"},
		{"unbalanced parenthesis", `(user == "u_1"`, ""},
		{"string result", `user + "x"`, "bool"},
		{"number result", `1 + 2`, "bool"},
		{"map result", `claims`, "bool"},
		{"unknown variable", `nobody == "x"`, "nobody"},
		{"unknown context field", `context.channel == "x"`, "channel"},
		{"Go field name instead of tag", `context.ThreadID != ""`, "ThreadID"},
		{"unknown function", `launch(user)`, "launch"},
		{"type mismatch", `user > 1`, ""},
		{"empty", ``, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := policy.Compile(tt.src)
			if err == nil {
				t.Fatalf("Compile(%q) succeeded", tt.src)
			}
			if a != nil {
				t.Error("an Allow returned with an error")
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("allow %q", tt.src)) {
				t.Errorf("error %q does not name the expression %q", err, tt.src)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
}

func TestCompileSource(t *testing.T) {
	src := `claims.role == "admin" || user == "u_1"`
	a, err := policy.Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	if a.Source() != src {
		t.Errorf("Source() = %q, want %q", a.Source(), src)
	}
}

// decodeInput decodes JSON the way the gateway does: numbers kept as
// jsonread.Number, then made plain.
func decodeInput(t *testing.T, s string) map[string]any {
	t.Helper()
	v, err := jsonread.Value(jsontext.NewDecoder(strings.NewReader(s)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Plain(v)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := p.(map[string]any)
	if !ok {
		t.Fatalf("Plain(%s) is not a map", s)
	}
	return m
}

func TestEval(t *testing.T) {
	env := policy.Env{
		Claims:  map[string]any{"role": "admin", "level": 3.0, "groups": []any{"ops", "dev"}},
		User:    "u_1",
		Install: "in_1",
		Tool:    "x",
		Context: policy.Context{Source: "thread", ThreadID: "th_9"},
		Input:   decodeInput(t, `{"amount": 42, "big": 1e3, "name": "n", "word": "x", "items": [{"qty": 2}], "flag": true}`),
	}
	noRole := env
	noRole.Claims = map[string]any{}
	nilClaims := env
	nilClaims.Claims = nil
	noThread := env
	noThread.Context = policy.Context{Source: "api"}
	bigAmount := env
	bigAmount.Input = decodeInput(t, `{"amount": 100}`)

	tests := []struct {
		name    string
		src     string
		env     policy.Env
		want    bool
		wantErr string
	}{
		{name: "role admin", src: `claims.role == "admin"`, env: env, want: true},
		{name: "role other", src: `claims.role == "viewer"`, env: env, want: false},
		{name: "role by index", src: `claims["role"] == "admin"`, env: env, want: true},
		{name: "claim number", src: `claims.level >= 3`, env: env, want: true},
		{name: "claim list", src: `"ops" in claims.groups`, env: env, want: true},
		{name: "claim list miss", src: `"hr" in claims.groups`, env: env, want: false},
		{name: "user", src: `user == "u_1"`, env: env, want: true},
		{name: "other user", src: `user == "u_2"`, env: env, want: false},
		{name: "install in list", src: `install in ["in_1"]`, env: env, want: true},
		{name: "install not in list", src: `install in ["in_2", "in_3"]`, env: env, want: false},
		{name: "tool", src: `tool == "x"`, env: env, want: true},
		{name: "other tool", src: `tool == "y"`, env: env, want: false},
		{name: "context source", src: `context.source == "thread"`, env: env, want: true},
		{name: "context source api", src: `context.source == "thread"`, env: noThread, want: false},
		{name: "thread id set", src: `context.threadId != ""`, env: env, want: true},
		{name: "thread id empty", src: `context.threadId != ""`, env: noThread, want: false},
		{name: "input amount under", src: `input.amount < 100`, env: env, want: true},
		{name: "input amount at bound", src: `input.amount < 100`, env: bigAmount, want: false},
		{name: "input exponent number", src: `input.big == 1000`, env: env, want: true},
		{name: "input nested number", src: `input.items[0].qty == 2`, env: env, want: true},
		{name: "input bool", src: `input.flag`, env: env, want: true},
		{name: "input string", src: `input.name == "n"`, env: env, want: true},
		{name: "combined", src: `claims.role == "admin" && context.source == "thread" && input.amount < 100`, env: env, want: true},
		{name: "combined one false", src: `claims.role == "admin" && tool == "y"`, env: env, want: false},
		{name: "missing claim compared", src: `claims.role == "admin"`, env: noRole, want: false},
		{name: "nil claims compared", src: `claims.role == "admin"`, env: nilClaims, want: false},
		{name: "missing claim not equal", src: `claims.role != "admin"`, env: noRole, want: true},
		{name: "missing input field compared", src: `input.nothing == 1`, env: env, want: false},

		// Run-time errors deny, with the error.
		{name: "string compared with number", src: `input.word < 100`, env: env, want: false, wantErr: "invalid operation"},
		{name: "missing claim as a number", src: `claims.level > 3`, env: noRole, want: false, wantErr: "invalid operation"},
		{name: "member of a missing claim", src: `claims.org.id == "o"`, env: noRole, want: false, wantErr: "cannot fetch"},
		{name: "index out of range", src: `input.items[5].qty == 2`, env: env, want: false, wantErr: "out of range"},
		{name: "non-bool claim as the result", src: `claims.role`, env: env, want: false, wantErr: "bool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := policy.Compile(tt.src)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			got, err := a.Eval(tt.env)
			if got != tt.want {
				t.Errorf("Eval = %v, want %v", got, tt.want)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("Eval error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Eval gave no error, want one saying %q", tt.wantErr)
			}
			t.Logf("error: %v", err)
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not say %q", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("allow %q", tt.src)) {
				t.Errorf("error %q does not name the expression", err)
			}
		})
	}
}

// One compiled expression serves many environments.
func TestEvalReused(t *testing.T) {
	a, err := policy.Compile(`user == "u_1" && input.amount < 100`)
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		user   string
		amount float64
		want   bool
	}{{"u_1", 1, true}, {"u_2", 1, false}, {"u_1", 100, false}, {"u_1", 99.5, true}} {
		got, err := a.Eval(policy.Env{User: tc.user, Input: map[string]any{"amount": tc.amount}})
		if err != nil || got != tc.want {
			t.Errorf("case %d: Eval = %v, %v; want %v", i, got, err, tc.want)
		}
	}
}

func TestPlain(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want any
	}{
		{"integer", jsonread.Number("42"), 42.0},
		{"fraction", jsonread.Number("-1.5"), -1.5},
		{"exponent", jsonread.Number("1e3"), 1000.0},
		{"string untouched", "42", "42"},
		{"bool untouched", true, true},
		{"nil untouched", nil, nil},
		{"float untouched", 2.5, 2.5},
		{"map", map[string]any{"a": jsonread.Number("1"), "b": "x"}, map[string]any{"a": 1.0, "b": "x"}},
		{"array", []any{jsonread.Number("1"), jsonread.Number("2.5"), "x"}, []any{1.0, 2.5, "x"}},
		{"nested", map[string]any{
			"list": []any{map[string]any{"n": jsonread.Number("7"), "deep": []any{[]any{jsonread.Number("8")}}}},
			"obj":  map[string]any{"m": map[string]any{"k": jsonread.Number("9")}},
		}, map[string]any{
			"list": []any{map[string]any{"n": 7.0, "deep": []any{[]any{8.0}}}},
			"obj":  map[string]any{"m": map[string]any{"k": 9.0}},
		}},
		{"empty map", map[string]any{}, map[string]any{}},
		{"empty array", []any{}, []any{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := policy.Plain(tt.in)
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Plain(%#v) = %#v, %v; want %#v", tt.in, got, err, tt.want)
			}
		})
	}
}

// TestPlainNumbers holds the rule that a policy judges what the target
// gets (docs/security.md, TestAllowComparesWhatTheTargetGets): the number an
// expression compares
// is exactly the number the target receives (the input's text), or Plain
// fails and the policy denies.
func TestPlainNumbers(t *testing.T) {
	tests := []struct {
		text string
		want any // a float64, or nil for an *InexactError
	}{
		{"0", 0.0},
		{"-0", 0.0},
		{"7", 7.0},
		{"-7", -7.0},
		{"9007199254740992", 9007199254740992.0}, // 2^53
		{"9007199254740993", nil},                // a float64 would make it 2^53
		{"-9007199254740993", nil},
		{"9007199254740994", 9007199254740994.0},
		{"9007199254740994.0", 9007199254740994.0},
		{"9223372036854775807", nil},                     // max int64
		{"9223372036854775808", 9223372036854775808.0},   // 2^63, a float64 exactly
		{"18446744073709551616", 18446744073709551616.0}, // 2^64
		{"18446744073709551617", nil},
		{"100000000000000000000", 1e20},
		{"1e20", 1e20},
		{"1E+2", 100.0},
		{"100.0", 100.0},
		{"100.000", 100.0},
		{"1.00e2", 100.0},
		{"0.1", 0.1},
		{"-2.50", -2.5},
		{"0.30000000000000004", 0.30000000000000004},
		{"-0.0", 0.0},
		{"0e999", 0.0},
		{"1e-5", 1e-5},
		{"1.7976931348623157e308", 1.7976931348623157e308},
		{"5e-324", 5e-324},
		{"100.0000000000000001", nil}, // 100 to a float64, more than 100 to a decimal reader
		{"9007199254740993.0", nil},
		{"9007199254740993e0", nil},
		{"0.30000000000000001", nil}, // its float64 is 0.3's, written "0.3"
		{"123456789012345678901234567890", nil},
		{"-123456789012345678901234567890", nil},
		{"1e400", nil},
		{"-1e400", nil},
		{"1e-400", nil}, // 0 to a float64
		{"2.4703282292062328e-324", nil},
		{"1e99999999999999999999", nil},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			got, err := policy.Plain(map[string]any{"a": []any{jsonread.Number(tt.text)}})
			if tt.want == nil {
				var ie *policy.InexactError
				if !errors.As(err, &ie) || ie.Path != "input.a.0" || !strings.Contains(err.Error(), "input.a.0") {
					t.Fatalf("Plain(%s) = %#v, %v; want an InexactError at input.a.0", tt.text, got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Plain(%s): %v", tt.text, err)
			}
			if n := got.(map[string]any)["a"].([]any)[0]; n != tt.want {
				t.Errorf("Plain(%s) = %#v (%T), want %#v (%T)", tt.text, n, n, tt.want, tt.want)
			}
		})
	}
}

// TestPlainLongNumber checks that the error cuts a long number short.
func TestPlainLongNumber(t *testing.T) {
	long := strings.Repeat("9", 5000)
	_, err := policy.Plain(map[string]any{"n": jsonread.Number(long)})
	if err == nil || len(err.Error()) > 300 {
		t.Errorf("Plain of a 5000-digit number: %v", err)
	}
}

// Plain copies: the decoded input is left as it was.
func TestPlainCopies(t *testing.T) {
	in := map[string]any{"a": jsonread.Number("1"), "l": []any{jsonread.Number("2")}}
	p, err := policy.Plain(in)
	if err != nil {
		t.Fatal(err)
	}
	out := p.(map[string]any)
	out["a"] = "changed"
	out["l"].([]any)[0] = "changed"
	if in["a"] != jsonread.Number("1") || in["l"].([]any)[0] != jsonread.Number("2") {
		t.Errorf("Plain changed its input: %#v", in)
	}
}

// TestAllowExactNumbers runs allow expressions over inputs as the gateway
// decodes them: comparisons beyond 2^53 are exact, and an inexact number
// denies with an error naming the expression and the number's place.
func TestAllowExactNumbers(t *testing.T) {
	tests := []struct {
		src, input string
		want       bool
		wantErr    string
	}{
		{`input.amount <= 9007199254740992`, `{"amount": 9007199254740993}`, false, "9007199254740993"},
		{`input.amount <= 9007199254740992`, `{"amount": 9007199254740992}`, true, ""},
		{`input.amount > 9007199254740992`, `{"amount": 9007199254740994}`, true, ""},
		{`input.amount == 9007199254740992`, `{"amount": 9007199254740992}`, true, ""},
		{`input.amount >= -9007199254740992`, `{"amount": -9007199254740993}`, false, "-9007199254740993"},
		{`input.amount < 9223372036854775807`, `{"amount": 9223372036854775807}`, false, "9223372036854775807"},
		// Arithmetic does not wrap: 2^62 * 4 is not 0.
		{`input.price * input.qty <= 1000`, `{"price": 4611686018427387904, "qty": 4}`, false, ""},
		{`input.a + input.b <= 100`, `{"a": 9223372036854775808, "b": 9223372036854775808}`, false, ""},
		{`input.amount <= 100`, `{"amount": 100}`, true, ""},
		{`input.amount <= 100`, `{"amount": 100.0}`, true, ""},
		{`input.amount <= 100`, `{"amount": 1e2}`, true, ""},
		{`input.amount <= 100`, `{"amount": 100.5}`, false, ""},
		{`input.amount <= 100`, `{"amount": 100.0000000000000001}`, false, "100.0000000000000001"},
		{`input.amount <= 100`, `{"amount": 1e400}`, false, "1e400"},
		{`input.amount <= 100`, `{"amount": -1e400}`, false, "-1e400"},
		{`input.amount < 0.3`, `{"amount": 0.1}`, true, ""},
		{`input.amount <= 100`, `{"amount": 5, "other": 123456789012345678901234567890}`, false, "input.other"},
		{`all(input.items, .n < 10)`, `{"items": [{"n": 1}, {"n": 9007199254740993.0}]}`, false, "input.items.1.n"},
		{`$env.input.amount <= 100`, `{"amount": 100.0000000000000001}`, false, "input.amount"},
		// A policy that cannot see the input is not held to its numbers.
		{`user == "u_1"`, `{"amount": 100.0000000000000001}`, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.src+" "+tt.input, func(t *testing.T) {
			a, err := policy.Compile(tt.src)
			if err != nil {
				t.Fatal(err)
			}
			v, err := jsonread.Value(jsontext.NewDecoder(strings.NewReader(tt.input)))
			if err != nil {
				t.Fatal(err)
			}
			got, err := false, error(nil)
			in, err := a.Input(v)
			if err == nil {
				got, err = a.Eval(policy.Env{User: "u_1", Input: in})
			}
			if got != tt.want {
				t.Errorf("allowed = %v, want %v (error %v)", got, tt.want, err)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), fmt.Sprintf("allow %q", tt.src)) {
				t.Errorf("error %v; want one naming the expression and %q", err, tt.wantErr)
			}
		})
	}
}

func TestCompileString(t *testing.T) {
	a, err := policy.CompileString(`claims.approver ?? ""`, "assignee")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		claims map[string]any
		want   string
	}{
		{map[string]any{"approver": "phone-1"}, "phone-1"},
		{map[string]any{}, ""},
	} {
		got, err := a.EvalString(policy.Env{Claims: tc.claims, Input: map[string]any{}})
		if err != nil || got != tc.want {
			t.Errorf("claims %v: %q, %v; want %q", tc.claims, got, err, tc.want)
		}
	}
	if _, err := policy.CompileString(`1 + 1`, "assignee"); err == nil || !strings.Contains(err.Error(), "assignee") {
		t.Errorf("a number for a string: %v", err)
	}
	if _, err := policy.CompileWhen(`1 + 1`); err == nil || !strings.Contains(err.Error(), "approval") {
		t.Errorf("a non-bool condition: %v", err)
	}
}
