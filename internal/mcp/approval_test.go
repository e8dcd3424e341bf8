package mcp

import (
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/result"
)

// TestApprovalFields: a form offers the input's fields only when it can
// hold every one of them.
func TestApprovalFields(t *testing.T) {
	for _, tc := range []struct {
		name, schema, input string
		fields              int
	}{
		{"flat", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"number"},"c":{"type":"boolean"},"d":{"type":"string","enum":["x","y"]}}}`, `{"a":"s","b":1.5,"c":true,"d":"x"}`, 4},
		{"an array among them", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"array"}}}`, `{"a":"s"}`, 0},
		{"an object among them", `{"type":"object","properties":{"a":{"type":"object"}}}`, `{}`, 0},
		{"a union type", `{"type":"object","properties":{"a":{"type":["string","null"]}}}`, `{}`, 0},
		{"an enum of numbers", `{"type":"object","properties":{"a":{"type":"integer","enum":[1,2]}}}`, `{}`, 0},
		{"a field named button", `{"type":"object","properties":{"button":{"type":"string"}}}`, `{}`, 0},
		{"no properties", `{"type":"object"}`, `{}`, 0},
	} {
		got := approvalFields(&result.CardApproval{Schema: jsontext.Value(tc.schema), Input: jsontext.Value(tc.input)})
		if len(got) != tc.fields {
			t.Errorf("%s: %d fields %v, want %d", tc.name, len(got), got, tc.fields)
		}
	}
	got := approvalFields(&result.CardApproval{
		Schema: jsontext.Value(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}}}`),
		Input:  jsontext.Value(`{"a":5,"b":3}`),
	})
	if _, ok := got["a"].(map[string]any)["default"]; ok {
		t.Errorf("a number filled in a string field: %v", got["a"])
	}
	if d := got["b"].(map[string]any)["default"]; d != 3.0 {
		t.Errorf("b's default %v, want 3", d)
	}
}
