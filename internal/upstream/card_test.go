package upstream

import (
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/result"
)

func schema(props string, required ...string) map[string]any {
	var s map[string]any
	req, _ := json.Marshal(required)
	if required == nil {
		req = []byte("[]")
	}
	if err := json.Unmarshal([]byte(`{"type":"object","properties":{`+props+`},"required":`+string(req)+`}`), &s); err != nil {
		panic(err)
	}
	return s
}

// TestChoices: a card has buttons only, and each form of elicitation
// gets the buttons that can answer it.
func TestChoices(t *testing.T) {
	for _, c := range []struct {
		name   string
		params *sdk.ElicitParams
		want   string // label=content, ...
		note   string // in the note; "" for none
	}{
		{"no fields", &sdk.ElicitParams{Mode: "form", RequestedSchema: schema(``)}, `Accept={} Decline`, ""},
		{"no schema", &sdk.ElicitParams{Mode: "form"}, `Accept={} Decline`, ""},
		{"boolean", &sdk.ElicitParams{RequestedSchema: schema(`"ok":{"type":"boolean"}`, "ok")}, `Yes={"ok":true} No={"ok":false} Decline`, ""},
		{"enum", &sdk.ElicitParams{RequestedSchema: schema(`"size":{"type":"string","enum":["s","m"],"enumNames":["Small","Medium"]}`)}, `Small={"size":"s"} Medium={"size":"m"} Decline`, ""},
		{"oneOf", &sdk.ElicitParams{RequestedSchema: schema(`"n":{"type":"number","oneOf":[{"const":1,"title":"One"},{"const":2}]}`)}, `One={"n":1} 2={"n":2} Decline`, ""},
		{"defaults", &sdk.ElicitParams{RequestedSchema: schema(`"a":{"type":"string","default":"x"},"b":{"type":"integer","default":3}`, "a", "b")}, `Accept={"a":"x","b":3} Decline`, ""},
		{"optional without default", &sdk.ElicitParams{RequestedSchema: schema(`"a":{"type":"string","default":"x"},"b":{"type":"string"}`, "a")}, `Accept={"a":"x"} Decline`, ""},
		{"free text", &sdk.ElicitParams{RequestedSchema: schema(`"name":{"type":"string"},"age":{"type":"integer"}`, "name", "age")}, `Decline`, "asks for age, name"},
		{"url", &sdk.ElicitParams{Mode: "url", URL: "https://auth.example/x"}, `Done={} Decline`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cs, note := choicesOf(c.params)
			var got []string
			for _, ch := range cs {
				if ch.answer.Action != "accept" {
					got = append(got, ch.label)
					continue
				}
				b, _ := json.Marshal(ch.answer.Content, json.Deterministic(true))
				got = append(got, ch.label+"="+string(b))
			}
			if strings.Join(got, " ") != c.want {
				t.Errorf("buttons %s, want %s", strings.Join(got, " "), c.want)
			}
			if (c.note == "") != (note == "") || !strings.Contains(note, c.note) {
				t.Errorf("note %q, want %q", note, c.note)
			}
		})
	}
	many := `"c":{"type":"string","enum":[` + strings.Repeat(`"x",`, maxChoices) + `"y"]}`
	if cs, note := choicesOf(&sdk.ElicitParams{RequestedSchema: schema(many, "c")}); len(cs) != 1 || note == "" {
		t.Errorf("%d values: %d buttons, note %q; want Decline only", maxChoices+1, len(cs), note)
	}
}

// TestInputCard: the card the gateway builds from input requests, which
// shows the server's text as text and continues the call.
func TestInputCard(t *testing.T) {
	s := &Server{cfg: Config{Name: "crm"}}
	args := jsontext.Value(`{"id":7}`)
	out := s.inputCard("send_mail", args, &sdk.CallToolResult{
		InputRequests: sdk.InputRequestMap{
			"q":     &sdk.ElicitParams{Mode: "form", Message: "Send it?\n[click](https://evil.example) <img src=x>", RequestedSchema: schema(``)},
			"roots": &sdk.ListRootsParams{},
		},
		RequestState: "st-1",
	})
	if out.Card == nil {
		t.Fatalf("no card: %+v", out.Result)
	}
	card, err := result.ParseCard(out.Card)
	if err != nil {
		t.Fatal(err)
	}
	if card.Title != "Send it?" || !strings.Contains(card.Description, `\[click\](https://evil.example)`) || strings.Contains(card.Description, "<img") ||
		!strings.Contains(card.Description, `send\_mail`) {
		t.Errorf("card = %+v", card)
	}
	accept, _ := card.Button("accept")
	var k continuation
	if err := json.Unmarshal(accept.Input, &k); err != nil {
		t.Fatal(err)
	}
	if string(k.Arguments) != `{"id":7}` || k.RequestState != "st-1" || k.Elicit["q"].Action != "accept" || len(k.Roots) != 1 || k.Roots[0] != "roots" {
		t.Errorf("continuation = %+v", k)
	}
	if string(accept.Target) != `{"type":"mcp","server":"crm","tool":"send_mail","continue":true}` {
		t.Errorf("target = %s", accept.Target)
	}
	resp := k.responses()
	if _, ok := resp["roots"].(*sdk.ListRootsResult); !ok || resp["q"].(*sdk.ElicitResult).Action != "accept" {
		t.Errorf("responses = %+v", resp)
	}

	for name, reqs := range map[string]sdk.InputRequestMap{
		"two questions": {"a": &sdk.ElicitParams{Message: "a"}, "b": &sdk.ElicitParams{Message: "b"}},
		"sampling":      {"s": &sdk.CreateMessageParams{}},
		"roots only":    {"r": &sdk.ListRootsParams{}},
		"busy":          {},
	} {
		if out := s.inputCard("t", args, &sdk.CallToolResult{InputRequests: reqs}); out.Card != nil || !out.Result.IsError || !strings.Contains(out.Result.Content, "mcp server crm") {
			t.Errorf("%s: %+v", name, out)
		}
	}
}

func TestToolName(t *testing.T) {
	for in, want := range map[string]string{"search": "search", "files.read": "files_read", "a/b c": "a_b_c", "ü": "_"} {
		if got := toolName(in); got != want {
			t.Errorf("toolName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCommandEnv: a command gets PATH, HOME, LANG and its own env, never
// the rest of the gateway's environment.
func TestCommandEnv(t *testing.T) {
	t.Setenv("TOOLGATE_TEST_SECRET", "s3cret")
	t.Setenv("PATH", "/usr/bin")
	s := &Server{cfg: Config{Name: "x", Command: []string{"prog", "a"}, Env: map[string]string{"OWN": "1"}}}
	cmd := s.command()
	env := strings.Join(cmd.Env, "\n")
	if strings.Contains(env, "s3cret") || !strings.Contains(env, "PATH=/usr/bin") || !strings.Contains(env, "OWN=1") {
		t.Errorf("env = %q", cmd.Env)
	}
}
