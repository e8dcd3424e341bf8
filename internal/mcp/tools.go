package mcp

import (
	"bytes"
	"reflect"

	"github.com/go-json-experiment/json/jsontext"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/result"
)

// toolIndex is what the server knows of the gateway's tools besides the
// SDK's list.
type toolIndex struct {
	// tools are the tools as tools/list gives them, by name.
	tools map[string]*sdk.Tool
	// ui are the tools whose answers show in the MCP Apps view, as
	// tools/list gives them to Apps clients (with the view in _meta).
	ui map[string]*sdk.Tool
	// fast are the tools whose sessionless calls the fast path (fast.go)
	// may serve: the gateway's, but for those whose input schema binds a
	// parameter to a header, which the SDK checks.
	fast map[string]bool
}

// syncTools makes the SDK's list the gateway's set: tools gone are
// removed, new or changed ones added. The SDK tells the sessions that
// their list changed (notifications/tools/list_changed).
func (s *Server) syncTools(set *manifest.Set) {
	s.indexMu.Lock()
	defer s.indexMu.Unlock()
	old := s.index.Load()
	next := &toolIndex{tools: map[string]*sdk.Tool{}, ui: map[string]*sdk.Tool{}, fast: map[string]bool{}}
	for _, t := range set.List() {
		tool := sdkTool(t)
		next.tools[t.Name] = tool
		next.fast[t.Name] = !bytes.Contains(t.InputSchema, []byte("x-mcp-header"))
		if t.ShowsUI() {
			ui := *tool
			ui.Meta = uiMeta()
			next.ui[t.Name] = &ui
		}
	}
	var gone []string
	for name := range old.tools {
		if _, ok := next.tools[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		s.server.RemoveTools(gone...)
	}
	for name, tool := range next.tools {
		if prev, ok := old.tools[name]; !ok || !reflect.DeepEqual(prev, tool) {
			s.server.AddTool(tool, s.call)
		}
	}
	s.index.Store(next)
}

// sdkTool is a tool as tools/list gives it.
func sdkTool(t *manifest.Compiled) *sdk.Tool {
	tool := &sdk.Tool{
		Name:        t.Name,
		Title:       t.DisplayName,
		Description: t.Description,
		InputSchema: jsontext.Value(t.InputSchema),
	}
	if t.OutputSchema != nil {
		tool.OutputSchema = jsontext.Value(t.OutputSchema)
	}
	if a := t.Annotations; a != nil {
		tool.Annotations = &sdk.ToolAnnotations{
			DestructiveHint: a.DestructiveHint,
			OpenWorldHint:   a.OpenWorldHint,
			ReadOnlyHint:    a.ReadOnlyHint != nil && *a.ReadOnlyHint,
			IdempotentHint:  a.IdempotentHint != nil && *a.IdempotentHint,
		}
	}
	return tool
}

// itemContent are an upstream MCP tool's items as MCP content again.
func itemContent(items []result.Item) []sdk.Content {
	out := make([]sdk.Content, 0, len(items))
	for _, it := range items {
		switch it.Type {
		case "image":
			out = append(out, &sdk.ImageContent{Data: it.Data, MIMEType: it.MIMEType})
		case "audio":
			out = append(out, &sdk.AudioContent{Data: it.Data, MIMEType: it.MIMEType})
		case "resource_link":
			out = append(out, &sdk.ResourceLink{URI: it.URI, Name: it.Name, Title: it.Title, MIMEType: it.MIMEType})
		case "resource":
			out = append(out, &sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: it.URI, MIMEType: it.MIMEType, Text: it.Text, Blob: it.Data}})
		}
	}
	return out
}
