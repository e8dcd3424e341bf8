package mcp

import (
	"bytes"
	"context"
	"reflect"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/dispatch"
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
	if meta, _, ok := upstreamView(t); ok {
		tool.Meta = meta
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

// upstreamViewPrefix starts the names under which the gateway serves the
// MCP Apps views of upstream MCP servers' tools:
// ui://toolgate/upstream/SERVER/ and the server's own URI without ui://.
const upstreamViewPrefix = "ui://toolgate/upstream/"

// upstreamView returns the view an upstream MCP server's tool names in
// _meta.ui.resourceUri (or the older _meta["ui/resourceUri"]), and its
// _meta as the gateway lists it: the same, the view named as the gateway
// serves it. ok is false for any other tool.
func upstreamView(t *manifest.Compiled) (meta sdk.Meta, view string, ok bool) {
	if t.Target.Spec.Type != dispatch.TypeMCP || t.Meta == nil {
		return nil, "", false
	}
	ui, _ := t.Meta["ui"].(map[string]any)
	view, _ = ui["resourceUri"].(string)
	if view == "" {
		view, _ = t.Meta["ui/resourceUri"].(string)
	}
	rest, isUI := strings.CutPrefix(view, "ui://")
	if !isUI || rest == "" {
		return nil, "", false
	}
	ours := upstreamViewPrefix + t.Target.Spec.Server + "/" + rest
	meta = sdk.Meta{}
	for k, v := range t.Meta {
		meta[k] = v
	}
	if ui != nil {
		copied := map[string]any{}
		for k, v := range ui {
			copied[k] = v
		}
		copied["resourceUri"] = ours
		meta["ui"] = copied
	}
	if _, ok := t.Meta["ui/resourceUri"]; ok {
		meta["ui/resourceUri"] = ours
	}
	return meta, view, true
}

// resourceReader is an upstream MCP server that reads its resources
// (upstream.Server).
type resourceReader interface {
	ReadResource(ctx context.Context, uri string) (*sdk.ReadResourceResult, error)
}

// readUpstreamView serves an upstream tool's view under the gateway's
// name for it: read from the server, only if one of the tools the
// gateway serves from that server names it, so that no other resource of
// the server is reached through the gateway.
func (s *Server) readUpstreamView(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri := req.Params.URI
	server, rest, _ := strings.Cut(strings.TrimPrefix(uri, upstreamViewPrefix), "/")
	want := "ui://" + rest
	for _, t := range s.gw.Tools().List() {
		if t.Target.Spec.Server != server {
			continue
		}
		if _, view, ok := upstreamView(t); !ok || view != want {
			continue
		}
		reader, ok := t.Target.Server.(resourceReader)
		if !ok {
			break
		}
		res, err := reader.ReadResource(ctx, want)
		if err != nil {
			return nil, err
		}
		out := &sdk.ReadResourceResult{Meta: res.Meta}
		for _, c := range res.Contents {
			if c == nil {
				continue
			}
			cc := *c
			cc.URI = uri
			out.Contents = append(out.Contents, &cc)
		}
		return out, nil
	}
	return nil, sdk.ResourceNotFoundError(uri)
}
