package policy_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

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
// json.Number, then made plain.
func decodeInput(t *testing.T, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	m, ok := policy.Plain(v).(map[string]any)
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
		{"number", json.Number("42"), 42.0},
		{"fraction", json.Number("-1.5"), -1.5},
		{"exponent", json.Number("1e3"), 1000.0},
		{"out of float range", json.Number("1e400"), "1e400"},
		{"string untouched", "42", "42"},
		{"bool untouched", true, true},
		{"nil untouched", nil, nil},
		{"float untouched", 2.5, 2.5},
		{"map", map[string]any{"a": json.Number("1"), "b": "x"}, map[string]any{"a": 1.0, "b": "x"}},
		{"array", []any{json.Number("1"), json.Number("2.5"), "x"}, []any{1.0, 2.5, "x"}},
		{"nested", map[string]any{
			"list": []any{map[string]any{"n": json.Number("7"), "deep": []any{[]any{json.Number("8")}}}},
			"obj":  map[string]any{"m": map[string]any{"k": json.Number("9")}},
		}, map[string]any{
			"list": []any{map[string]any{"n": 7.0, "deep": []any{[]any{8.0}}}},
			"obj":  map[string]any{"m": map[string]any{"k": 9.0}},
		}},
		{"empty map", map[string]any{}, map[string]any{}},
		{"empty array", []any{}, []any{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := policy.Plain(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Plain(%#v) = %#v, want %#v", tt.in, got, tt.want)
			}
		})
	}
}

// Plain copies: the decoded input is left as it was.
func TestPlainCopies(t *testing.T) {
	in := map[string]any{"a": json.Number("1"), "l": []any{json.Number("2")}}
	out := policy.Plain(in).(map[string]any)
	out["a"] = "changed"
	out["l"].([]any)[0] = "changed"
	if in["a"] != json.Number("1") || in["l"].([]any)[0] != json.Number("2") {
		t.Errorf("Plain changed its input: %#v", in)
	}
}
