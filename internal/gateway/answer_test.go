package gateway

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/result"
)

// reflected is an answer as encoding/json writes it from struct tags: the
// shape AppendJSON writes by hand.
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
			CallID string          `json:"callId"`
			Tool   string          `json:"tool"`
			Status string          `json:"status"`
			Card   json.RawMessage `json:"card"`
		}{a.CallID, a.Tool, a.Status, a.Card}
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
		{"card", Answer{CallID: "c", Tool: "t", Status: StatusActionRequired, Card: json.RawMessage(`{"type":"action_required","title":"<ok>"}`)}},
		{"running", Answer{CallID: "c", Tool: "t", Status: StatusRunning, Result: result.Result{Content: "not shown"}}},
		{"awaiting client", Answer{CallID: "c", Tool: "t", Status: StatusAwaitingClient}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.a.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(got) {
				t.Fatalf("invalid JSON: %s", got)
			}
			want, err := json.Marshal(reflected(&c.a))
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(want, &w); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("AppendJSON wrote\n%s\nencoding/json writes\n%s", got, want)
			}
			// Appending keeps what the buffer held.
			if buf := c.a.AppendJSON([]byte("x")); string(buf) != "x"+string(got) {
				t.Errorf("AppendJSON to a buffer holding \"x\" = %s", buf)
			}
		})
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
