package result_test

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/jsonread/legacyjson"
	"github.com/toolgate/toolgate/internal/mapping"
	"github.com/toolgate/toolgate/internal/result"
)

var fuzzContentTypes = []string{
	"",
	"text/plain",
	"text/plain; charset=utf-8",
	"text/html",
	"application/json",
	"application/json; charset=utf-8",
	"application/problem+json",
	"application/octet-stream",
}

func FuzzNormalize(f *testing.F) {
	seeds := []struct {
		status uint16
		ct     uint8
		body   string
	}{
		{200, 0, "hello"},
		{200, 1, "caf\xe9"},
		{200, 4, `{"content":"c"}`},
		{200, 4, `{"content":"c","markdown":"m","embedUrl":"https://a.example/x"}`},
		{200, 5, `{"content":"c","embedUrl":"/relative"}`},
		{200, 4, `{"content":"c","embedUrl":"javascript:alert(1)"}`},
		{200, 4, `{"content":"c","embedUrl":"HTTPS://a.example"}`},
		{200, 6, `{"content":"c","markdown":"m"}`},
		{200, 4, `{"content":1}`},
		{200, 4, `{"content":null}`},
		{200, 4, `null`},
		{200, 4, `[1,2]`},
		{200, 4, `{"content":`},
		{200, 4, `{"type":"action_required","content":"x"}`},
		{200, 4, `{"content":"a","content":1}`},
		{200, 4, "{\"content\":\"\xff\"}"},
		{200, 4, `{"cont\u0065nt":"a","type":{"type":"action_required"}}`},
		{200, 4, `{"content":"a"} x`},
		{200, 4, ` [1, {"content":"a"}] `},
		{200, 4, `[1,`},
		{200, 4, `{"type":"action\u005frequired","type":"x","content":"c"}`},
		{200, 4, `{"markdown":null,"embedUrl":null,"content":"c","x":[{"y":null}]}`},
		{404, 4, `{"code":"nf","error":"missing"}`},
		{500, 1, strings.Repeat("€", 600)},
		{500, 1, "\xff\xfe"},
		{204, 0, ""},
		{101, 4, `{"content":"c"}`},
	}
	for _, s := range seeds {
		f.Add(s.status-100, s.ct, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, st uint16, ctIdx uint8, body []byte) {
		status := 100 + int(st)%500
		ct := fuzzContentTypes[int(ctIdx)%len(fuzzContentTypes)]
		r, card := result.NormalizeOrCard(status, ct, body)
		if status >= 200 && status <= 299 && (strings.HasPrefix(ct, "application/json") || ct == "application/problem+json") {
			sameAsMapDecode(t, body, r, card)
		}

		for name, s := range map[string]string{"content": r.Content, "markdown": r.Markdown, "embedUrl": r.EmbedURL} {
			if !utf8.ValidString(s) {
				t.Fatalf("%s %q is not valid UTF-8", name, s)
			}
		}
		ok2xx := status >= 200 && status <= 299
		if !ok2xx && !r.IsError {
			t.Fatalf("status %d gave a non-error result %+v", status, r)
		}
		if r.IsError {
			if r.Content == "" || r.Markdown != "" || r.EmbedURL != "" || r.Card != "" {
				t.Fatalf("error result %+v: want a message and no card channels", r)
			}
			return
		}

		switch r.Card {
		case result.CardEmbed:
			u, err := url.Parse(r.EmbedURL)
			lower := strings.ToLower(r.EmbedURL)
			if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") ||
				!(strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://")) {
				t.Fatalf("card shows embed %q, which is not an absolute http(s) URL", r.EmbedURL)
			}
		case result.CardMarkdown:
			if r.Markdown == "" || r.EmbedURL != "" {
				t.Fatalf("card shows markdown for %+v", r)
			}
		case "":
			if r.Markdown != "" || r.EmbedURL != "" {
				t.Fatalf("no card for %+v", r)
			}
		default:
			t.Fatalf("unknown card %q", r.Card)
		}

		isJSON := strings.HasPrefix(ct, "application/json") || ct == "application/problem+json"
		if !isJSON {
			if r.Content != string(body) || r.Card != "" {
				t.Fatalf("text answer %q gave %+v, want the body as content", body, r)
			}
			return
		}
		var obj map[string]any
		if err := legacyjson.Unmarshal(body, &obj); err != nil || obj == nil {
			t.Fatalf("non-error result %+v from a JSON body that is not an object: %q", r, body)
		}
		content, ok := obj["content"].(string)
		if !ok || content != r.Content {
			t.Fatalf("non-error result %+v from %q, whose content is %#v", r, body, obj["content"])
		}
		if obj["type"] == "action_required" {
			t.Fatalf("action-required card %q gave a non-error result", body)
		}
	})
}

// mapFromJSON is how a JSON answer was read before the one-pass reader:
// encoding/json into a map, exact names, the last of repeated names. The
// fuzz target holds the reader to it.
func mapFromJSON(body []byte) (r result.Result, card bool, invalid bool) {
	var obj map[string]legacyjson.RawMessage
	if err := legacyjson.Unmarshal(body, &obj); err != nil {
		if legacyjson.Valid(body) {
			return result.Failure("handler answered JSON that is not an object: a JSON answer needs a string \"content\""), false, false
		}
		return result.Failure("handler answered invalid JSON"), false, true
	}
	if obj == nil {
		return result.Failure("handler answered JSON null: a JSON answer needs a string \"content\""), false, false
	}
	var typ string
	if t, ok := obj["type"]; ok && legacyjson.Unmarshal(t, &typ) == nil && typ == result.CardType {
		return result.Failure("handler answered an action-required card where a tool result was expected"), true, false
	}
	raw, ok := obj["content"]
	if !ok {
		return result.Failure("handler answered JSON without \"content\": a JSON answer needs a string \"content\" for the model"), false, false
	}
	if err := legacyjson.Unmarshal(raw, &r.Content); err != nil || string(raw) == "null" {
		return result.Failure("handler answered a \"content\" that is not a string"), false, false
	}
	if raw, ok := obj["markdown"]; ok && string(raw) != "null" {
		if err := legacyjson.Unmarshal(raw, &r.Markdown); err != nil {
			return result.Failure("handler answered a \"markdown\" that is not a string"), false, false
		}
	}
	if raw, ok := obj["embedUrl"]; ok && string(raw) != "null" {
		if err := legacyjson.Unmarshal(raw, &r.EmbedURL); err != nil {
			return result.Failure("handler answered an \"embedUrl\" that is not a string"), false, false
		}
		if err := result.CheckEmbedURL(r.EmbedURL); err != nil {
			return result.Failure("handler answered an invalid \"embedUrl\": %v", err), false, false
		}
	}
	switch {
	case r.EmbedURL != "":
		r.Card = result.CardEmbed
	case r.Markdown != "":
		r.Card = result.CardMarkdown
	}
	return r, false, false
}

func sameAsMapDecode(t *testing.T, body []byte, got result.Result, gotCard bool) {
	t.Helper()
	want, wantCard, invalid := mapFromJSON(body)
	if invalid {
		if !got.IsError || !strings.HasPrefix(got.Content, want.Content) {
			t.Fatalf("invalid JSON %q gave %+v, want %q", body, got, want.Content)
		}
		return
	}
	if !got.Equal(want) || gotCard != wantCard {
		t.Fatalf("%q gave %+v (card %v), encoding/json into a map gives %+v (card %v)", body, got, gotCard, want, wantCard)
	}
}

// FuzzParseCard holds ParseCard to the card rules, and to a round trip: the
// card the gateway records (its JSON) parses again to the same card when a
// button is pressed. It also holds the two readers of "is this a card" to
// each other: NormalizeOrCard's, and a result mapping's, which decodes the
// body into Go values. ParseCard reads a JSON value as encoding/json did.
func FuzzParseCard(f *testing.F) {
	for _, s := range []string{
		`{"type":"action_required","title":"Send?","elements":[{"type":"button","id":"a","label":"A","input":{"content":"ok"}}]}`,
		`{"type":"action_required","title":"t","assignee":{"computerId":"pc-7"},"elements":[{"type":"button","id":"a","label":"A","variant":"primary","target":{"type":"app","component":"api","method":"POST","path":"/x"}}]}`,
		`{"type":"action_required","title":"t","elements":[{"type":"button","id":"a","label":"A"},{"type":"button","id":"a","label":"B"}]}`,
		`{"TYPE":"action_required","Title":"t","elements":[{"type":"button","id":"a","label":"A"}]}`,
		`{"type":"action\u005frequired","type":"x","title":"t","elements":[]}`,
		`{"type":"action_required","title":"t","elements":[{"type":"button","id":"a","label":"A","target":null,"input":null}]}`,
		`{"type":"action_required","title":"t","elements":[{"type":"link","id":"a","label":"A"}],"extra":1}`,
		`{"type":"action_required","title":"t","assignee":{},"elements":[{"type":"button","id":"a","label":"A"}]}`,
		"{\"type\":\"action_required\",\"title\":\"\xff\",\"elements\":[{\"type\":\"button\",\"id\":\"\xfe\",\"label\":\"A\"}]}",
	} {
		f.Add([]byte(s))
	}
	toText, err := mapping.Compile(`"text"`)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		mapped := toText.Apply(200, http.Header{"Content-Type": {"application/json"}}, body)
		if refused := mapped.IsError && strings.Contains(mapped.Content, result.ErrCardNotFromApp.Error()); refused != result.IsCard(body) {
			t.Fatalf("%q: a mapping refuses it as a card: %v; IsCard: %v", body, refused, result.IsCard(body))
		}

		if legacyjson.Valid(body) {
			sameCardAsV1(t, body)
		}
		c, err := result.ParseCard(body)
		if err != nil {
			if c != nil {
				t.Fatalf("ParseCard returned a card and the error %v", err)
			}
			if !strings.HasPrefix(err.Error(), "invalid card: ") {
				t.Fatalf("error %q does not say the card is invalid", err)
			}
			return
		}
		if c.Type != result.CardType || c.Title == "" || len(c.Elements) == 0 || (c.Assignee != nil && c.Assignee.ComputerID == "") {
			t.Fatalf("ParseCard(%q) accepted %+v", body, c)
		}
		ids := map[string]bool{}
		for _, e := range c.Elements {
			if e.Type != "button" || e.ID == "" || e.Label == "" || ids[e.ID] {
				t.Fatalf("ParseCard(%q) accepted the button %+v", body, e)
			}
			ids[e.ID] = true
			if b, ok := c.Button(e.ID); !ok || b.ID != e.ID {
				t.Fatalf("Button(%q) = %+v, %v", e.ID, b, ok)
			}
		}
		recorded, err := legacyjson.Marshal(c)
		if err != nil {
			t.Fatalf("the accepted card %q does not marshal: %v", body, err)
		}
		again, err := result.ParseCard(recorded)
		if err != nil {
			t.Fatalf("the recorded card %s does not parse: %v", recorded, err)
		}
		if twice, _ := legacyjson.Marshal(again); !bytes.Equal(twice, recorded) {
			t.Fatalf("the recorded card %s parses to %s", recorded, twice)
		}
	})
}
