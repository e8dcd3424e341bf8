package web

// MCPAppURI is the MCP Apps resource that shows any tool's answer.
const MCPAppURI = "ui://toolgate/card"

// MCPAppMIMEType is the media type of an MCP Apps view (SEP-1865).
const MCPAppMIMEType = "text/html;profile=mcp-app"

// MCPApp returns the MCP Apps view served as MCPAppURI: one self-contained
// HTML document (no network loads of its own) that renders a tool result's
// structuredContent with <toolgate-card>.
//
// Placeholder until the view lands; the contract is in the notes.
func MCPApp() []byte {
	return []byte(`<!doctype html><html><head><meta charset="utf-8"><title>toolgate</title></head><body><p>toolgate</p></body></html>`)
}
