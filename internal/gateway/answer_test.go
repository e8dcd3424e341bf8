package gateway

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/jsonread/legacyjson"
	"github.com/toolgate/toolgate/internal/result"
)

// reflected is an answer as encoding/json writes it from struct tags: the
// shape of each status, which MarshalJSONTo picks.
func reflected(a *Answer) any {
	switch a.Status {
	case StatusDone:
		return struct {
			CallID string `json:"callId"`
			Tool   string `json:"tool"`
			Status string `json:"status"`
			result.Result
		}{a.CallID, a.Tool, a.Status, a.Result}
	case StatusActionRequired:
		return struct {
			CallID string                `json:"callId"`
			Tool   string                `json:"tool"`
			Status string                `json:"status"`
			Card   legacyjson.RawMessage `json:"card"`
		}{a.CallID, a.Tool, a.Status, legacyjson.RawMessage(a.Card)}
	}
	return struct {
		CallID string `json:"callId"`
		Tool   string `json:"tool"`
		Status string `json:"status"`
	}{a.CallID, a.Tool, a.Status}
}

func TestAnswerJSON(t *testing.T) {
	tricky := "<a href=\"x\">&</a>\n\t\\ \u2028\u2029 \x00\x1f é 😀 \xff"
	for _, c := range []struct {
		name string
		a    Answer
	}{
		{"done", Answer{CallID: "call_1", Tool: "t", Status: StatusDone, Result: result.Result{Content: "hi"}}},
		{"done, every channel", Answer{CallID: "c", Tool: "t", Status: StatusDone, Result: result.Result{
			Content: "c", Markdown: "**m**", EmbedURL: "https://a.example/x?y=1&z=<2>", Card: result.CardEmbed}}},
		{"error", Answer{CallID: "c", Tool: "t", Status: StatusDone, Result: result.Failure("failed: %s", tricky)}},
		{"tricky strings", Answer{CallID: tricky, Tool: tricky, Status: StatusDone, Result: result.Result{Content: tricky, Markdown: tricky}}},
		{"empty content", Answer{CallID: "c", Tool: "t", Status: StatusDone}},
		{"card", Answer{CallID: "c", Tool: "t", Status: StatusActionRequired, Card: jsontext.Value(`{"type":"action_required","title":"<ok>"}`)}},
		{"running", Answer{CallID: "c", Tool: "t", Status: StatusRunning, Result: result.Result{Content: "not shown"}}},
		{"awaiting client", Answer{CallID: "c", Tool: "t", Status: StatusAwaitingClient}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.a.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if !legacyjson.Valid(got) {
				t.Fatalf("invalid JSON: %s", got)
			}
			if want, same := reflectedJSON(t, &c.a, got); !same {
				t.Errorf("AppendJSON wrote\n%s\nencoding/json writes\n%s", got, want)
			}
			// Appending keeps what the buffer held.
			if buf := c.a.AppendJSON([]byte("x")); string(buf) != "x"+string(got) {
				t.Errorf("AppendJSON to a buffer holding \"x\" = %s", buf)
			}
		})
	}
}

// reflectedJSON is what encoding/json writes for the shape of a, and
// whether got holds the same JSON value.
func reflectedJSON(t *testing.T, a *Answer, got []byte) (want []byte, same bool) {
	t.Helper()
	want, err := legacyjson.Marshal(reflected(a))
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := legacyjson.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := legacyjson.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	return want, reflect.DeepEqual(g, w)
}

// FuzzAnswerJSON holds AppendJSON to what it promises for any strings and
// any recorded card: it does not fail, it writes JSON, and that JSON is the
// value encoding/json writes for the shape of the status, with a card that
// is not JSON as null. Its own strings are valid UTF-8; a card is copied as
// recorded, as it was before json v2, and the gateway records only cards it
// wrote with encoding/json, which are valid UTF-8.
func FuzzAnswerJSON(f *testing.F) {
	f.Add("call_1", "t", uint8(0), "hi", "", []byte(nil))
	f.Add("c\xff", "<t>", uint8(0), "\x00\u2028", "**m**", []byte(nil))
	f.Add("c", "t", uint8(1), "", "", []byte(`{"type":"action_required","title":"\u003c\xff","title":"x"}`))
	f.Add("c", "t", uint8(1), "", "", []byte(`{"title":`))
	f.Add("c", "t", uint8(2), "not shown", "", []byte(`{}`))
	statuses := []string{StatusDone, StatusActionRequired, StatusRunning, StatusAwaitingClient, "other"}
	f.Fuzz(func(t *testing.T, callID, tool string, status uint8, content, markdown string, card []byte) {
		a := Answer{CallID: callID, Tool: tool, Status: statuses[int(status)%len(statuses)],
			Result: result.Result{Content: content, Markdown: markdown}, Card: card}
		got := a.AppendJSON(nil)
		if !legacyjson.Valid(got) || (a.Status != StatusActionRequired && !utf8.Valid(got)) {
			t.Fatalf("AppendJSON wrote invalid JSON: %q", got)
		}
		if !legacyjson.Valid(a.Card) {
			a.Card = jsontext.Value("null")
		}
		if want, same := reflectedJSON(t, &a, got); !same {
			t.Fatalf("AppendJSON wrote\n%q\nencoding/json writes\n%q", got, want)
		}
	})
}

// The bytes of each shape, as the hand-written encoder before json v2 wrote
// them: strings escaped only where JSON requires it, invalid UTF-8 as
// U+FFFD, a recorded card copied as it is, and one that is not JSON as null.
func TestAnswerJSONBytes(t *testing.T) {
	for _, c := range []struct {
		name string
		a    Answer
		want string
	}{
		{"done", Answer{CallID: "call_1", Tool: "t", Status: StatusDone, Result: result.Result{Content: "hi"}},
			`{"callId":"call_1","tool":"t","status":"done","isError":false,"content":"hi"}`},
		{"done, every channel", Answer{CallID: "c", Tool: "t", Status: StatusDone, Result: result.Result{
			IsError: true, Content: "c", Markdown: "**m**", EmbedURL: "https://a.example/?a=1&b=<2>", Card: result.CardEmbed}},
			`{"callId":"c","tool":"t","status":"done","isError":true,"content":"c","markdown":"**m**","embedUrl":"https://a.example/?a=1&b=<2>","card":"embed"}`},
		{"escapes", Answer{CallID: "c", Tool: "t", Status: StatusDone, Result: result.Result{Content: "\"\\\n\x00\u2028é😀\xff<>&"}},
			"{\"callId\":\"c\",\"tool\":\"t\",\"status\":\"done\",\"isError\":false,\"content\":\"\\\"\\\\\\n\\u0000\u2028é😀\uFFFD<>&\"}"},
		{"card", Answer{CallID: "c", Tool: "t", Status: StatusActionRequired, Result: result.Result{Content: "not shown", Card: result.CardMarkdown},
			Card: jsontext.Value(`{"type":"action_required","title":"\u003cok\u003e \u00e9"}`)},
			`{"callId":"c","tool":"t","status":"action_required","card":{"type":"action_required","title":"\u003cok\u003e \u00e9"}}`},
		{"card with a repeated name", Answer{CallID: "c", Tool: "t", Status: StatusActionRequired, Card: jsontext.Value(`{"title":"a","title":"b"}`)},
			`{"callId":"c","tool":"t","status":"action_required","card":{"title":"a","title":"b"}}`},
		{"card that is not JSON", Answer{CallID: "c", Tool: "t", Status: StatusActionRequired, Card: jsontext.Value(`{"title":`)},
			`{"callId":"c","tool":"t","status":"action_required","card":null}`},
		{"no card", Answer{CallID: "c", Tool: "t", Status: StatusActionRequired},
			`{"callId":"c","tool":"t","status":"action_required","card":null}`},
		{"running", Answer{CallID: "c", Tool: "t", Status: StatusRunning, Result: result.Result{Content: "not shown"}},
			`{"callId":"c","tool":"t","status":"running"}`},
		{"awaiting client", Answer{CallID: "c", Tool: "t", Status: StatusAwaitingClient, Card: jsontext.Value(`{}`)},
			`{"callId":"c","tool":"t","status":"awaiting_client"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.a.AppendJSON(nil); string(got) != c.want {
				t.Errorf("AppendJSON wrote\n%s\nwant\n%s", got, c.want)
			}
			// Within another value, on an encoder with the default
			// options, which refuse invalid UTF-8: the same bytes.
			var buf bytes.Buffer
			enc := jsontext.NewEncoder(&buf)
			if err := json.MarshalEncode(enc, []*Answer{&c.a}); err != nil {
				t.Fatal(err)
			}
			if got, want := buf.String(), "["+c.want+"]\n"; got != want {
				t.Errorf("in an array, MarshalJSONTo wrote\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// A done answer writes every field of result.Result: one added to it is
// written without a change here, and reads back as it was.
func TestAnswerWritesEveryResultField(t *testing.T) {
	var want result.Result
	v := reflect.ValueOf(&want).Elem()
	for i := range v.NumField() {
		switch f := v.Field(i); f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.String:
			f.SetString("v" + v.Type().Field(i).Name)
		case reflect.Slice:
			switch f.Interface().(type) {
			case jsontext.Value:
				f.Set(reflect.ValueOf(jsontext.Value(`{"v":"` + v.Type().Field(i).Name + `"}`)))
			case []result.Item:
				f.Set(reflect.ValueOf([]result.Item{{Type: "image", MIMEType: "image/png", Data: []byte{1, 2}, URI: "https://x.example/a", Name: "n", Title: "t", Text: "x"}}))
			default:
				t.Fatalf("result.Result.%s is a %s: teach this test to set one", v.Type().Field(i).Name, f.Type())
			}
		default:
			t.Fatalf("result.Result.%s is a %s: teach this test to set one", v.Type().Field(i).Name, f.Kind())
		}
	}
	a := Answer{CallID: "c", Tool: "t", Status: StatusDone, Result: want}
	var got struct {
		CallID string `json:"callId"`
		Tool   string `json:"tool"`
		Status string `json:"status"`
		result.Result
	}
	if err := json.Unmarshal(a.AppendJSON(nil), &got, json.RejectUnknownMembers(true)); err != nil {
		t.Fatal(err)
	}
	if !got.Result.Equal(want) || got.CallID != a.CallID || got.Tool != a.Tool || got.Status != a.Status {
		t.Errorf("the answer read back is %+v, want %+v", got, a)
	}
}

// The Kazzle-Tool-Context header is the text encoding/json wrote for the
// origin, whatever a thread id CheckOrigin lets through holds.
func TestContextHeader(t *testing.T) {
	for _, o := range []Origin{
		{},
		{Source: SourceThread, ThreadID: "th_1"},
		{Source: SourceThread, ThreadID: `<script>&"quoted"\ \u0041 é 😀 \u2028\u2029    �`},
		{Source: SourceThread, ThreadID: strings.Repeat("\u00e9", MaxIdentityLen/6)},
	} {
		if err := CheckOrigin(&o); err != nil {
			t.Fatalf("CheckOrigin(%+v): %v", o, err)
		}
		want, err := legacyjson.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if got := contextHeader(&Call{Origin: o}); got != string(want) {
			t.Errorf("contextHeader(%+v) = %s, encoding/json wrote %s", o, got, want)
		}
	}
	if got := contextHeader(&Call{Origin: Origin{Source: SourceAPI}}); got != `{"source":"api"}` {
		t.Errorf("contextHeader of an api call = %s", got)
	}
}

// BenchmarkAnswerJSON writes the answer of the load harness's call: done,
// with a 1 KiB content, into a reused buffer as the handler does.
func BenchmarkAnswerJSON(b *testing.B) {
	a := &Answer{CallID: NewCallID(), Tool: "get_item", Status: StatusDone,
		Result: result.Result{Content: strings.Repeat("x", 1010)}}
	buf := make([]byte, 0, 4<<10)
	b.ReportAllocs()
	for b.Loop() {
		buf = a.AppendJSON(buf[:0])
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkAnswerJSONSize writes large answers into the handler's 4 KiB
// pooled buffer: what they allocate is the point (AppendJSON's Grow).
func BenchmarkAnswerJSONSize(b *testing.B) {
	for _, n := range []int{64 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dKiB", n>>10), func(b *testing.B) {
			a := &Answer{CallID: NewCallID(), Tool: "echo", Status: StatusDone,
				Result: result.Result{Content: strings.Repeat("y", n)}}
			b.ReportAllocs()
			b.SetBytes(int64(n))
			for b.Loop() {
				_ = a.AppendJSON(make([]byte, 0, 4<<10))
			}
		})
	}
}

// BenchmarkContextHeader is the header of an api call, once a constant.
func BenchmarkContextHeader(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = contextHeader(&Call{Origin: Origin{Source: SourceAPI}})
	}
}
