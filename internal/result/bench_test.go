package result_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/mapping"
	"github.com/toolgate/toolgate/internal/result"
)

// BenchmarkNormalize reads the load harness's answer: a JSON object with a
// 1 KiB content.
func BenchmarkNormalize(b *testing.B) {
	body := []byte(`{"content":"` + strings.Repeat("x", 1010) + `","meta":{"n":1}}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if r := result.Normalize(200, "application/json", body); r.IsError {
			b.Fatal(r.Content)
		}
	}
}

// BenchmarkMapping maps a url target's answer, a JSON object of 1 KiB, as
// a result expression does.
func BenchmarkMapping(b *testing.B) {
	m, err := mapping.Compile(`{"content": body.title, "markdown": "**" + body.title + "**"}`)
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"title":"` + strings.Repeat("x", 900) + `","id":42,"tags":["a","b","c"],"meta":{"n":1,"ok":true}}`)
	header := http.Header{"Content-Type": {"application/json"}}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if r := m.Apply(200, header, body); r.IsError {
			b.Fatal(r.Content)
		}
	}
}
