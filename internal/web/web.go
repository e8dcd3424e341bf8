// Package web embeds the static assets toolgate serves: the browser client
// that runs client tools in the user's page.
package web

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
)

// ClientJS is the browser client, one dependency-free ES module.
//
//go:embed client.js
var ClientJS []byte

// ClientETag is ClientJS's entity tag.
var ClientETag = func() string {
	sum := sha256.Sum256(ClientJS)
	return `"` + hex.EncodeToString(sum[:8]) + `"`
}()
