package ledger

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/toolgate/toolgate/internal/jsonread/legacyjson"
	"github.com/toolgate/toolgate/internal/result"
)

// reflectEncode is encoding/json (legacyjson: the reference these tests hold
// the ledger to) from the struct tags, HTML escaping off: how calls have
// always been stored, which encodeCall keeps.
func reflectEncode(t *testing.T, c *Call) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := legacyjson.NewEncoder(&buf)
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
		{"card and resume", Call{Key: "k", State: Done, Card: jsontext.Value(` {"type": "action_required", "title": "<ok>"} `),
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
	if _, err := encodeCall(&Call{Key: "k", Card: jsontext.Value(`{"a":`)}); err == nil {
		t.Error("encodeCall with a broken card: want an error")
	}
	if _, err := encodeCall(&Call{Key: "k", Created: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}); err == nil {
		t.Error("encodeCall in the year 10000: want an error, as encoding/json gives")
	}
}

// oldInputDigest is InputDigest as it was before RFC 8785: the SHA-256 of
// encoding/json's text of the input. Digests it made are in ledgers now.
func oldInputDigest(input any) string {
	b, _ := legacyjson.Marshal(input)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// decodeInput decodes as the gateway does: json.Number for numbers.
func decodeInput(t testing.TB, raw string) any {
	t.Helper()
	d := legacyjson.NewDecoder(strings.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	return v
}

// InputDigest keeps the digests stored before it for equal inputs, so that
// a repeat of a call recorded before an upgrade is still a repeat after it.
func TestInputDigest(t *testing.T) {
	for _, in := range []string{
		`{}`, `[]`, `null`, `"x"`, `{"id":"b1"}`,
		`{"b":1,"a":2,"c":{"z":[1,{"y":null,"x":true}],"a":false}}`,
		`{"n":1.0,"m":1e2,"o":1E+2,"p":-0,"q":0.10,"r":-1.5e-7}`,
		`{"big":12345678901234567890,"bigger":1234567890123456789012345678901234567890}`,
		`{"s":"\u00e9\u0041 é \ud83d\ude00 😀"}`,
		`{"html":"<a href=\"x\">&amp;</a>","js":"\u2028\u2029"}`,
		`{"ctl":"\u0000\u0001\b\f\n\r\t\u001f\u007f \/ \\ \""}`,
		`{"é":1,"e":2,"z":3,"\u00e9\u0301":4,"<&>":5,"":6}`,
		`{"bad":"\udc00 \ud800"}`,
		"{\"raw\":\"\xff\xfe\"}",
	} {
		v := decodeInput(t, in)
		if got, want := InputDigest(v), oldInputDigest(v); got != want {
			t.Errorf("InputDigest(%s) = %s; the digest stored before is %s", in, got, want)
		}
	}
	// The text of an input that is not JSON is hashed as a string.
	for _, in := range []string{`{"id":`, `{"a":1,"a":2}`, `not json <&> \u2028`} {
		if got, want := InputDigest(in), oldInputDigest(in); got != want {
			t.Errorf("InputDigest(%q) = %s; the digest stored before is %s", in, got, want)
		}
	}

	// Equal inputs have one digest; inputs that differ, however little,
	// have two, numbers included (RFC 8785 alone would make them doubles).
	same := [][2]string{
		{`{"a":1,"b":[1,2]}`, `{ "b" : [1, 2], "a" : 1 }`},
		{`{"s":"é"}`, `{"s":"\u00e9"}`},
	}
	for _, p := range same {
		if InputDigest(decodeInput(t, p[0])) != InputDigest(decodeInput(t, p[1])) {
			t.Errorf("%s and %s: two digests for one input", p[0], p[1])
		}
	}
	differ := [][2]string{
		{`{"n":1}`, `{"n":1.0}`},
		{`{"n":1e2}`, `{"n":100}`},
		{`{"n":12345678901234567890}`, `{"n":12345678901234567891}`},
		{`{"n":0}`, `{"n":-0}`},
		{`{"a":[1,2]}`, `{"a":[2,1]}`},
		{`{"s":"a"}`, `"{\"s\":\"a\"}"`},
	}
	for _, p := range differ {
		if InputDigest(decodeInput(t, p[0])) == InputDigest(decodeInput(t, p[1])) {
			t.Errorf("%s and %s: one digest for two inputs", p[0], p[1])
		}
	}

	// Where the digests stored before differ: names ordered by UTF-16 (RFC
	// 8785), not UTF-8, when they first differ at a character from U+E000
	// to U+FFFF and one above U+FFFF.
	v := decodeInput(t, `{"\ufffd":1,"😀":2}`)
	if InputDigest(v) == oldInputDigest(v) {
		t.Error("names ordered by UTF-16: want the documented difference from the old digest")
	}
	// And the text of an input that is not JSON and holds invalid UTF-8:
	// U+FFFD where encoding/json wrote \ufffd.
	if InputDigest("{\xff") == oldInputDigest("{\xff") {
		t.Error("invalid UTF-8 in an input that is not JSON: want the documented difference from the old digest")
	}
}

// FuzzInputDigest checks TestInputDigest's rule on any JSON: the digest is
// the one stored before, but for names TestInputDigest shows differ.
func FuzzInputDigest(f *testing.F) {
	f.Add(`{"a":1.0,"b":["<&>",{"c":-0}],"é":"\u2028"}`)
	f.Add(`[1e400,"\ud800",{"":null}]`)
	f.Fuzz(func(t *testing.T, in string) {
		d := legacyjson.NewDecoder(strings.NewReader(in))
		d.UseNumber()
		var v any
		if d.Decode(&v) != nil || d.More() {
			return
		}
		// Canonicalized from the bytes, the digest is the decoded value's.
		if raw, err := RawInputDigest([]byte(in)); err == nil && raw != InputDigest(v) {
			t.Errorf("RawInputDigest(%s) = %s, InputDigest of it decoded = %s", in, raw, InputDigest(v))
		}
		if hasHighName(v) {
			return
		}
		if got, want := InputDigest(v), oldInputDigest(v); got != want {
			t.Errorf("InputDigest(%s) = %s; the digest stored before is %s", in, got, want)
		}
	})
}

// hasHighName says whether an object in v has a name with a character
// from U+E000 up, where RFC 8785's order of names may not be encoding/json's.
func hasHighName(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if strings.IndexFunc(k, func(r rune) bool { return r >= 0xE000 }) >= 0 || hasHighName(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if hasHighName(e) {
				return true
			}
		}
	}
	return false
}

// A call stored in format 2 reads back as it was, every member of Call
// included, and its JSON holds none of what the key and the header hold.
func TestBoltValueRoundTrip(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	c := &Call{
		Key: Key("u", "i", "c1"), CallID: "c1", Tool: "t", User: "u", Install: "i", Source: "thread", ThreadID: "th",
		Digest: "d", State: ActionRequired, Result: &result.Result{IsError: true, Content: "x", Markdown: "m", EmbedURL: "https://e", Card: "markdown"},
		Card: []byte(`{"type":"confirm"}`), Resume: &Resume{ButtonID: "b", Action: "skip", Device: "dev"},
		Owner: "o", Deadline: now.Add(time.Minute), Created: now.Add(-time.Second), Updated: now,
	}
	v, err := boltValue(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{`"key"`, `"state"`, `"created"`, `"updated"`, `"deadline"`} {
		if bytes.Contains(v, []byte(name)) {
			t.Errorf("stored call holds %s: %s", name, v[boltHeader2Size:])
		}
	}
	got, err := boltCall(c.Key, v)
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("boltCall = %+v, %v; want %+v", got, err, c)
	}
	// No deadline stays none.
	c.Deadline = time.Time{}
	if v, err = boltValue(c); err == nil {
		got, err = boltCall(c.Key, v)
	}
	if err != nil || !got.Deadline.IsZero() {
		t.Fatalf("a call without a deadline read back with %v, %v", got.Deadline, err)
	}
}
