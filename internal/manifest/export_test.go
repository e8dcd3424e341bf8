package manifest

import (
	"testing"
	"time"
)

// SetCompileTimeout shortens the compiler's timeout for one test.
func SetCompileTimeout(t testing.TB, d time.Duration) {
	old := compileTimeout
	compileTimeout = d
	t.Cleanup(func() { compileTimeout = old })
}
