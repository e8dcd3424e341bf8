package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCaddyfileUI: a tool block's `ui on | off` is the manifest's "ui";
// anything else, a repeat, or ui on a url tool is an error naming the tool
// and its line; the card answer tool's name is reserved.
func TestCaddyfileUI(t *testing.T) {
	tool := func(extra ...string) []string {
		return append([]string{api, "tool t {", "description d", `input_schema {"type":"object"}`, "target app api GET /x"}, append(extra, "}")...)
	}
	for _, c := range []struct {
		lines []string
		want  string // the tool's "ui" member, or "" for none
	}{
		{tool(), ""},
		{tool("ui off"), `"ui":false`},
		{tool("ui on"), `"ui":true`},
	} {
		h, err := parseToolgate(c.lines...)
		if err != nil {
			t.Fatalf("%q: %v", c.lines, err)
		}
		b, _ := json.Marshal(h.Tools[0])
		if c.want == "" && strings.Contains(string(b), `"ui"`) || c.want != "" && !strings.Contains(string(b), c.want) {
			t.Errorf("%q parsed to %s, want %q", c.lines, b, c.want)
		}
	}
	for _, c := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"not on or off", tool("ui false"), "tool t: want: ui on | off, at Testfile:7"},
		{"no argument", tool("ui"), "wrong argument count or unexpected line ending after 'ui', at Testfile:7"},
		{"two arguments", tool("ui on off"), "wrong argument count"},
		{"repeated", tool("ui on", "ui off"), "tool t: ui already specified"},
		{"on a url tool", []string{api, "tool t {", "description d", `input_schema {"type":"object"}`, "target url GET https://x.example/", "ui on", "}"},
			`Testfile:3: tool "t": ui: only an app target shows in the MCP Apps view`},
		{"the card answer tool's name", []string{api, "tool toolgate_card_answer {", "description d", `input_schema {"type":"object"}`, "target app api GET /x", "}"},
			`Testfile:3: tool "toolgate_card_answer": name "toolgate_card_answer" is reserved`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseToolgate(c.lines...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want %q", err, c.want)
			}
		})
	}
}
