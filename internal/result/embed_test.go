package result

import "testing"

// TestEmbedOrigin: an embed origin goes into the CSP hosts build, so only
// an http(s) origin is taken, written as the CSP names it.
func TestEmbedOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"https://Site.Example":            "https://site.example",
		"http://127.0.0.1:8080/":          "http://127.0.0.1:8080",
		"https://[::1]:8443":              "https://[::1]:8443",
		"https://site.example/app":        "",
		"https://*.example.com":           "",
		"https://a.example;script-src *":  "",
		"https://a.example 'unsafe-eval'": "",
		"https://u@a.example":             "",
		"https://a.example?x":             "",
		"https://a.example#x":             "",
		"javascript:alert(1)":             "",
		"ftp://a.example":                 "",
		"a.example":                       "",
		"":                                "",
	} {
		got, err := EmbedOrigin(in)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("EmbedOrigin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
