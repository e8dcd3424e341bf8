package result_test

import (
	"strings"
	"testing"

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
