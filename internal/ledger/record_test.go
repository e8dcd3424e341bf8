package ledger

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/result"
)

// reflectEncode is how calls were stored before encodeCall was written by
// hand: encoding/json from the struct tags, HTML escaping off.
func reflectEncode(t *testing.T, c *Call) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func TestEncodeCall(t *testing.T) {
	now := time.Date(2026, 11, 30, 1, 2, 3, 456789000, time.UTC)
	local := time.Date(2026, 11, 30, 1, 2, 3, 0, time.FixedZone("X", 3*3600+1800))
	tricky := "<a href=\"x\">&</a>\n\t\\ \u2028 \x00 é 😀"
	for _, c := range []struct {
		name string
		call Call
	}{
		{"running", Call{Key: "u\x1fi\x1fc", CallID: "c", Tool: "t", User: "u", Install: "i", Source: "api",
			Digest: "d", State: Running, Owner: "o", Deadline: now, Created: now, Updated: now}},
		{"done, thread", Call{Key: "k", CallID: "c", Tool: "t", User: "u", Source: "thread", ThreadID: "th",
			Digest: "d", State: Done, Result: &result.Result{Content: strings.Repeat("x", 1024)}, Created: now, Updated: local}},
		{"done, every channel", Call{Key: "k", CallID: "c", Tool: "t", Digest: "d", State: Done,
			Result: &result.Result{Content: tricky, Markdown: tricky, EmbedURL: "https://a.example/?a=1&b=<2>", Card: "embed"}}},
		{"error result", Call{Key: "k", State: Done, Result: &result.Result{IsError: true, Content: "failed"}}},
		{"card and resume", Call{Key: "k", State: Done, Card: json.RawMessage(` {"type": "action_required", "title": "<ok>"} `),
			Resume: &Resume{ButtonID: "yes", Device: "pc-1"}, Result: &result.Result{Content: "approved"}}},
		{"resume action only", Call{Key: "k", State: Done, Resume: &Resume{Action: "skip"}}},
		{"empty resume", Call{Key: "k", State: ActionRequired, Resume: &Resume{}}},
		{"zero times", Call{Key: "k", State: AwaitingClient}},
		{"tricky strings", Call{Key: tricky, CallID: tricky, Tool: tricky, User: tricky, Digest: tricky, State: Running, Owner: tricky}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := encodeCall(&c.call)
			if err != nil {
				t.Fatal(err)
			}
			// The same bytes, but for U+2028 and U+2029, which encoding/json
			// escapes for JavaScript and JSON does not need escaped.
			want := strings.NewReplacer(`\u2028`, "\u2028", `\u2029`, "\u2029").Replace(string(reflectEncode(t, &c.call)))
			if string(got) != want {
				t.Errorf("encodeCall wrote\n%s\nencoding/json writes\n%s", got, want)
			}
			back, err := decodeCall("k", got)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back.Result, c.call.Result) || back.State != c.call.State || back.Key != c.call.Key {
				t.Errorf("decoded %+v, want %+v", back, c.call)
			}
		})
	}
	if _, err := encodeCall(&Call{Key: "k", Card: json.RawMessage(`{"a":`)}); err == nil {
		t.Error("encodeCall with a broken card: want an error")
	}
	if _, err := encodeCall(&Call{Key: "k", Created: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}); err == nil {
		t.Error("encodeCall in the year 10000: want an error, as encoding/json gives")
	}
}
