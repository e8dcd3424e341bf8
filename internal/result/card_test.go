package result_test

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/toolgate/toolgate/internal/mapping"

	"github.com/toolgate/toolgate/internal/jsonread/legacyjson"
	"github.com/toolgate/toolgate/internal/result"
)

func TestIsCard(t *testing.T) {
	for _, c := range []struct {
		body string
		want bool
	}{
		{`{"type":"action_required","title":"t","elements":[]}`, true},
		{`{"type":"action\u005frequired"}`, true},
		{` {"content":"c","type":"action_required"} `, true},
		{`{"type":"x","type":"action_required"}`, true},
		{`{"type":"action_required","type":"x"}`, false},
		{`{"TYPE":"action_required"}`, false},
		{`{"content":"action_required"}`, false},
		{`{"type":{"type":"action_required"}}`, false},
		{`[{"type":"action_required"}]`, false},
		{`"action_required"`, false},
		{`{"type":"action_required"`, false},
		{``, false},
	} {
		if got := result.IsCard([]byte(c.body)); got != c.want {
			t.Errorf("IsCard(%s) = %v, want %v", c.body, got, c.want)
		}
		if _, isCard := result.NormalizeOrCard(200, "application/json", []byte(c.body)); isCard != c.want {
			t.Errorf("NormalizeOrCard(%s) says card %v; IsCard must read bodies as it does", c.body, isCard)
		}
	}
}

// A mapping is for a url target, which may not answer a card: a card-shaped
// answer is refused before the mapping runs, and a mapping that makes one
// is refused too.
func TestMappingRefusesCards(t *testing.T) {
	card := `{"type":"action_required","title":"t","content":"c","elements":[{"type":"button","id":"b","label":"B",
		"target":{"type":"url","method":"GET","url":"http://localhost:2019/config/","result":"body"}}]}`
	for _, c := range []struct {
		name, src, body, want string
	}{
		{"card answer, mapping of one field", `body.content`, card, "the target answered an action-required card"},
		{"card answer, mapping of all", `body`, card, "the target answered an action-required card"},
		{"mapping makes a card", `{"content": "c", "type": "action_required", "elements": body.items}`, `{"items":[]}`, "the result mapping gave an action-required card"},
		{"mapping passes a card through", `body.inner`, `{"inner":` + card + `}`, "the result mapping gave an action-required card"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := mapping.Compile(c.src)
			if err != nil {
				t.Fatal(err)
			}
			got := m.Apply(200, jsonHeader(), []byte(c.body))
			if !got.IsError || !strings.Contains(got.Content, c.want) || !strings.Contains(got.Content, result.ErrCardNotFromApp.Error()) {
				t.Errorf("Apply = %+v, want an error result %q", got, c.want)
			}
		})
	}
	// A "type" of another value is data like any other.
	m, _ := mapping.Compile(`body.type`)
	if got := m.Apply(200, jsonHeader(), []byte(`{"type":"action"}`)); !got.Equal(result.Result{Content: "action"}) {
		t.Errorf("Apply = %+v", got)
	}
}

// parseCardV1 is how ParseCard read a card before json v2: encoding/json,
// unknown members refused. The v2 reading is held to it.
func parseCardV1(body []byte) (*result.Card, error) {
	var c result.Card
	dec := legacyjson.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, err
	}
	return &c, nil
}

// sameCardAsV1 checks ParseCard against parseCardV1 for one JSON value:
// both refuse it, or ParseCard reads the card encoding/json read, and
// checks it as it checks that card written with the names exact.
func sameCardAsV1(t *testing.T, body []byte) {
	t.Helper()
	got, err := result.ParseCard(body)
	read, errV1 := parseCardV1(body)
	if errV1 != nil {
		if err == nil {
			t.Fatalf("ParseCard(%q) accepted %+v; encoding/json refused it: %v", body, got, errV1)
		}
		return
	}
	// Without HTML escapes: encoding/json's Marshal would write a raw target's "&"
	// as \u0026, the same string but other bytes than ParseCard keeps.
	var buf bytes.Buffer
	enc := legacyjson.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(read)
	exact := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	want, wantErr := result.ParseCard(exact)
	if !reflect.DeepEqual(got, want) || fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Fatalf("ParseCard(%q) = %+v, %v; encoding/json read %s, which gives %+v, %v", body, got, err, exact, want, wantErr)
	}
}

func TestParseCardReadsAsEncodingJSON(t *testing.T) {
	const button = `{"type":"button","id":"a","label":"A"}`
	for _, body := range []string{
		`{"type":"action_required","title":"t","elements":[` + button + `]}`,
		`{"type":"action_required","title":"t","description":"d","assignee":{"computerId":"pc"},"elements":[{"type":"button","id":"a","label":"A","variant":"primary","input":{"content":"ok"},"target":{"type":"app"}}]}`,
		// Names in another case are the same member.
		`{"TYPE":"action_required","Title":"t","ELEMENTS":[{"Type":"button","ID":"a","Label":"A"}]}`,
		`{"type":"action_required","title":"t","aſſignee":{"computerid":"pc"},"elements":[` + button + `]}`,
		`{"type":"action_required","t\u0069tle":"t","elements":[` + button + `]}`,
		// But for '_' and '-', which count.
		`{"type":"action_required","ti_tle":"t","elements":[` + button + `]}`,
		`{"type":"action_required","title":"t","assignee":{"computer-id":"pc"},"elements":[` + button + `]}`,
		// The last of repeated names wins, whatever its case.
		`{"type":"action_required","title":"a","Title":"b","elements":[` + button + `],"elements":[{"type":"button","id":"b","label":"B"}]}`,
		`{"type":"action_required","title":"t","assignee":{"computerId":"a"},"assignee":{"computerId":"b"},"elements":[` + button + `]}`,
		// Invalid UTF-8 becomes U+FFFD, in a string or an escape.
		"{\"type\":\"action_required\",\"title\":\"\xff\",\"elements\":[{\"type\":\"button\",\"id\":\"\\ud800\",\"label\":\"A\"}]}",
		// Unknown members are refused, at any depth.
		`{"type":"action_required","title":"t","elements":[` + button + `],"extra":1}`,
		`{"type":"action_required","title":"t","assignee":{"computerId":"pc","x":1},"elements":[` + button + `]}`,
		`{"type":"action_required","title":"t","elements":[{"type":"button","id":"a","label":"A","x":null}]}`,
		// Nulls leave members empty; a null input or target is kept as null.
		`{"type":"action_required","title":"t","description":null,"assignee":null,"elements":[{"type":"button","id":"a","label":"A","input":null,"target":null}]}`,
		`{"type":"action_required","title":null,"elements":[` + button + `]}`,
		// Wrong types.
		`{"type":"action_required","title":1,"elements":[` + button + `]}`,
		`{"type":"action_required","title":"t","elements":{}}`,
		`{"type":"action_required","title":"t","elements":[` + button + `,1]}`,
		`[]`, `null`, `"card"`,
	} {
		sameCardAsV1(t, []byte(body))
	}
}

// What follows the card is refused; encoding/json's decoder left it unread.
// NormalizeOrCard refuses such an answer before ParseCard sees it.
func TestParseCardRefusesTrailingData(t *testing.T) {
	body := `{"type":"action_required","title":"t","elements":[{"type":"button","id":"a","label":"A"}]} {}`
	if c, err := result.ParseCard([]byte(body)); err == nil {
		t.Errorf("ParseCard(%s) = %+v", body, c)
	}
	if _, card := result.NormalizeOrCard(200, "application/json", []byte(body)); card {
		t.Errorf("NormalizeOrCard(%s) says it is a card", body)
	}
}

// fromButtonInputV1 is FromButtonInput as it was written on encoding/json.
func fromButtonInputV1(input legacyjson.RawMessage) result.Result {
	if len(bytes.TrimSpace(input)) == 0 {
		return result.Result{}
	}
	var obj map[string]legacyjson.RawMessage
	if legacyjson.Unmarshal(input, &obj) == nil {
		if _, ok := obj["content"]; ok {
			return result.Normalize(200, "application/json", input)
		}
	}
	var buf bytes.Buffer
	if err := legacyjson.Compact(&buf, input); err != nil {
		return result.Failure("the button's input is not valid JSON")
	}
	return result.Result{Content: buf.String()}
}

func TestFromButtonInputReadsAsEncodingJSON(t *testing.T) {
	for _, in := range []string{
		``, ` `, `{"content":"ok","markdown":"**ok**"}`, ` {"content": "a", "content": "b"} `, `{"\u0063ontent":"x"}`,
		`{"Content":"x"}`, `{"content":1}`, `{"content":null}`, "{\"content\":\"\xff\"}", "{\"cont\xffent\":\"x\",\"a\":\"\xff\"}",
		`{"a": 1, "a": 2, "b": [ 1.0e2 , "\u003c" ]}`, `[ {"content":"x"} ]`, `"text"`, ` null `, `12345678901234567890`,
		`{"content":"x"} {}`, `{"content":`, `nul`,
	} {
		got, want := result.FromButtonInput(jsontext.Value(in)), fromButtonInputV1(legacyjson.RawMessage(in))
		if got.IsError && want.IsError && strings.HasPrefix(got.Content, want.Content) {
			continue
		}
		if !got.Equal(want) {
			t.Errorf("FromButtonInput(%q) = %+v; on encoding/json %+v", in, got, want)
		}
	}
}
