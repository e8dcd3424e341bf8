package web

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// TestVendored checks that each vendored file served is the one pinned in
// VENDORED (vendor.sh also compares it with the registry's copy).
func TestVendored(t *testing.T) {
	f, err := os.Open("VENDORED")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Split(line, "\t")
		if len(fields) != 5 {
			t.Fatalf("VENDORED: %q: want 5 tab-separated fields", line)
		}
		name, sum, here := fields[0], fields[3], fields[4]
		file, ok := Files[here]
		if !ok {
			t.Errorf("%s: %s is not embedded", name, here)
			continue
		}
		got := sha256.Sum256(file.Body)
		if hex.EncodeToString(got[:]) != sum {
			t.Errorf("%s: %s has SHA-256 %x, pinned %s", name, here, got, sum)
		}
		n++
	}
	if n == 0 {
		t.Error("VENDORED lists nothing")
	}
}

func TestFiles(t *testing.T) {
	for name, want := range map[string]string{
		"client.js": "text/javascript; charset=utf-8",
		"card.js":   "text/javascript; charset=utf-8",
		"marked.js": "text/javascript; charset=utf-8",
	} {
		f, ok := Files[name]
		if !ok || f.ContentType != want || len(f.ETag) != 18 || f.Name != name {
			t.Errorf("%s: %+v", name, f)
		}
	}
	if string(ClientJS) != string(Files["client.js"].Body) || ClientETag != Files["client.js"].ETag {
		t.Error("ClientJS is not client.js")
	}
}
