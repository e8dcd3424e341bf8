// Package web embeds the static files toolgate serves: the browser client
// that runs client tools in the user's page, the <toolgate-card> renderer
// with its vendored markdown library, and the playground.
package web

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"mime"
	"path"
)

// Every .js and .html file here is served: see httpapi.
//
//go:embed *.js *.html
var files embed.FS

// File is one static file, read once at start.
type File struct {
	Name        string // its path under the handler, without a slash: "card.js"
	Body        []byte
	ContentType string
	ETag        string // a strong entity tag: the body's SHA-256, shortened
}

// Files are the served files by name.
var Files = func() map[string]File {
	entries, err := files.ReadDir(".")
	if err != nil {
		panic(err)
	}
	m := make(map[string]File, len(entries))
	for _, e := range entries {
		body, err := files.ReadFile(e.Name())
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(body)
		m[e.Name()] = File{
			Name:        e.Name(),
			Body:        body,
			ContentType: contentType(e.Name()),
			ETag:        `"` + hex.EncodeToString(sum[:8]) + `"`,
		}
	}
	return m
}()

// contentType is the file's media type by its extension; JavaScript as
// browsers require it for a module script.
func contentType(name string) string {
	switch path.Ext(name) {
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".html":
		return "text/html; charset=utf-8"
	}
	return mime.TypeByExtension(path.Ext(name))
}

// ClientJS is the browser client, one dependency-free ES module.
var ClientJS = Files["client.js"].Body

// ClientETag is ClientJS's entity tag.
var ClientETag = Files["client.js"].ETag
