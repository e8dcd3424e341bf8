// Package apitest holds what toolgate's endpoint tests share, whether they
// run the API under httptest (internal/httpapi) or inside Caddy
// (caddymodule, cmd/toolgate): a recording upstream, the test tool
// schemas, token minting for callers and pages, an SSE reader for the
// page stream, and small request helpers. It is for tests only, like
// internal/redistest; it imports no Caddy.
package apitest
