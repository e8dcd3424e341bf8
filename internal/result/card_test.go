package result_test

import (
	"strings"
	"testing"

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
			m, err := result.CompileMapping(c.src)
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
	m, _ := result.CompileMapping(`body.type`)
	if got := m.Apply(200, jsonHeader(), []byte(`{"type":"action"}`)); got != (result.Result{Content: "action"}) {
		t.Errorf("Apply = %+v", got)
	}
}
