package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/result"
)

// Keys of the _meta a call sends the server.
const (
	// MetaIdempotencyKey names the call as the Idempotency-Key header
	// names it to app components: a server may use it to run a call once,
	// as the gateway does, and one user's call never shares it with
	// another's.
	MetaIdempotencyKey = "toolgate/idempotencyKey"
	// MetaTraceparent is the call's W3C trace context.
	MetaTraceparent = "traceparent"
)

// tool is the server's tool t as the gateway serves it: the prefix put
// on its name, its schemas and hints as the server listed them.
func (s *Server) tool(t *sdk.Tool) manifest.Tool {
	out := manifest.Tool{
		Name:        s.cfg.Prefix + toolName(t.Name),
		DisplayName: t.Title,
		Description: t.Description,
		Target:      dispatch.Spec{Type: dispatch.TypeMCP, Server: s.cfg.Name, Tool: t.Name},
		Meta:        t.Meta,
		Allow:       s.cfg.Allow,
		Approval:    s.cfg.Approval,
		Limits:      s.cfg.Limits,
	}
	if out.DisplayName == "" && t.Annotations != nil {
		out.DisplayName = t.Annotations.Title
	}
	if strings.TrimSpace(out.Description) == "" {
		// A description is what the model reads; a server that gives
		// none still has its tool's name and its own name to go by.
		out.Description = fmt.Sprintf("%s (a tool of MCP server %s, which describes it no further)", t.Name, s.cfg.Name)
	}
	out.InputSchema, _ = json.Marshal(t.InputSchema, jsonread.Legacy)
	if t.OutputSchema != nil {
		out.OutputSchema, _ = json.Marshal(t.OutputSchema, jsonread.Legacy)
	}
	if a := t.Annotations; a != nil {
		out.Annotations = &manifest.Annotations{
			ReadOnlyHint: &a.ReadOnlyHint, IdempotentHint: &a.IdempotentHint,
			DestructiveHint: a.DestructiveHint, OpenWorldHint: a.OpenWorldHint,
		}
	}
	return out
}

// toolName is a server's tool name as the gateway takes one: MCP allows
// dots and slashes, which become underscores. The target keeps the
// server's own name.
func toolName(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, name)
}

// Placeholder is the tool the gateway serves for a tool the config names
// (Config.Tools) while the server has not listed it: every call of it
// answers that the server is unavailable.
func (s *Server) Placeholder(name string) manifest.Tool {
	return manifest.Tool{
		Name:        s.cfg.Prefix + toolName(name),
		Description: fmt.Sprintf("%s, a tool of MCP server %s, which is not reachable now.", name, s.cfg.Name),
		InputSchema: jsontext.Value(`{"type":"object"}`),
		Target:      dispatch.Spec{Type: dispatch.TypeMCP, Server: s.cfg.Name, Tool: name},
		Allow:       s.cfg.Allow,
		Approval:    s.cfg.Approval,
		Limits:      s.cfg.Limits,
	}
}

// Configured are the tool names the config lists (Config.Tools).
func (s *Server) Configured() []string { return s.cfg.Tools }

// Call runs one tools/call (dispatch.MCPServer). Every failure is an
// error result that names the server and says what failed, never a
// header, a token or the server's address.
func (s *Server) Call(ctx context.Context, c dispatch.MCPCall) dispatch.Outcome {
	params := &sdk.CallToolParams{Name: c.Tool, Meta: sdk.Meta{}}
	if c.IdempotencyKey != "" {
		params.Meta[MetaIdempotencyKey] = c.IdempotencyKey
	}
	if c.Traceparent != "" {
		params.Meta[MetaTraceparent] = c.Traceparent
	}
	args := c.Arguments
	if c.Continue != nil {
		var k continuation
		if err := json.Unmarshal(c.Continue, &k); err != nil {
			return fail("the card's answer cannot be read: %v", err)
		}
		args = k.Arguments
		params.RequestState = k.RequestState
		params.InputResponses = k.responses()
	}
	params.Arguments = args
	cs, fast, err := s.currentFor(ctx, c.Tool)
	if err != nil {
		return fail("mcp server %s is unavailable: %v", s.cfg.Name, trimName(err, s.cfg.Name))
	}
	st := new(callState)
	if s.cfg.Identity {
		if c.User == "" {
			return fail("mcp server %s is sent the user's identity, and the call names no user", s.cfg.Name)
		}
		var err error
		if st.auth, err = s.opts.Authorization(c.User, c.Install, s.cfg.Name); err != nil {
			s.opts.Logger.Error("signing an identity token", zap.Error(err))
			return fail("the gateway could not sign the identity token for mcp server %s", s.cfg.Name)
		}
	}
	if s.cfg.Connection != "" {
		if c.Token == "" {
			return fail("mcp server %s is sent the user's token of connection %s, and the call has none", s.cfg.Name, s.cfg.Connection)
		}
		st.auth = "Bearer " + c.Token
	}
	ctx = context.WithValue(ctx, callKey{}, st)
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	var res *sdk.CallToolResult
	if fast != "" {
		res, err = s.fastCall(ctx, fast, params)
	} else {
		res, err = cs.CallTool(ctx, params)
	}
	if err != nil {
		return s.callFailed(ctx, cs, st, err)
	}
	if res.NeedsInput() {
		return s.inputCard(c.Tool, args, res)
	}
	return dispatch.Outcome{Result: s.mapResult(res), Upstream: 200}
}

// callFailed maps a failed tools/call onto an error result. A failure of
// the session (not an error the server answered) drops it, so that the
// next call finds a new one.
func (s *Server) callFailed(ctx context.Context, cs *sdk.ClientSession, st *callState, err error) dispatch.Outcome {
	if rpc, ok := refusal(err); ok {
		return fail("mcp server %s refused the call: %s", s.cfg.Name, rpc.Message)
	}
	// Anything else may have broken the session: the next call gets a
	// new one.
	s.opts.Logger.Warn("mcp call failed; reconnecting", zap.Error(err))
	s.setDown(cs, s.failure("a call failed", err))
	s.wake(s.kick)
	switch {
	case st.tooLarge.Load() || errors.Is(err, errTooLarge):
		return fail("mcp server %s answered more than max_result_size (%d bytes)", s.cfg.Name, s.cfg.MaxResultSize)
	case ctx.Err() == context.DeadlineExceeded:
		return fail("mcp server %s did not answer within %v; the call may or may not have run", s.cfg.Name, s.cfg.Timeout)
	}
	return fail("mcp server %s: the call failed (%s); it may or may not have run", s.cfg.Name, reason(err))
}

// codeRejected is the code of the JSON-RPC error the SDK's client wraps a
// failure of its transport in: not the server's answer.
const codeRejected = -32005

// refusal is the server's own JSON-RPC error, if err is one.
func refusal(err error) (*jsonrpc.Error, bool) {
	var rpc *jsonrpc.Error
	if !errors.As(err, &rpc) || rpc.Code == codeRejected {
		return nil, false
	}
	return rpc, true
}

// reason says why a request failed without the server's address, which
// a transport error names (and which may hold a secret).
func reason(err error) string {
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Op + ": " + op.Err.Error()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	if inner := errors.Unwrap(err); inner != nil {
		return inner.Error()
	}
	return err.Error()
}

func fail(format string, args ...any) dispatch.Outcome {
	return dispatch.Outcome{Result: result.Failure(format, args...)}
}

// trimName drops a leading `mcp server "name": ` from err's text.
func trimName(err error, name string) string {
	return strings.TrimPrefix(err.Error(), fmt.Sprintf("mcp server %q: ", name))
}

// mapResult maps a tools/call result onto the gateway's channels: the
// text items, joined by blank lines, are the content; images, audio and
// resources are kept for MCP clients (Result.Items) and named in the
// markdown, as links where they have an http(s) URI; structuredContent
// passes through; isError stays an error.
func (s *Server) mapResult(res *sdk.CallToolResult) result.Result {
	var texts, notes []string
	var items []result.Item
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			texts = append(texts, c.Text)
		case *sdk.ImageContent:
			items = append(items, result.Item{Type: "image", MIMEType: c.MIMEType, Data: c.Data})
			notes = append(notes, fmt.Sprintf("*(an image, %s, shown to MCP clients)*", mdEscape(c.MIMEType)))
		case *sdk.AudioContent:
			items = append(items, result.Item{Type: "audio", MIMEType: c.MIMEType, Data: c.Data})
			notes = append(notes, fmt.Sprintf("*(audio, %s, given to MCP clients)*", mdEscape(c.MIMEType)))
		case *sdk.ResourceLink:
			items = append(items, result.Item{Type: "resource_link", URI: c.URI, Name: c.Name, Title: c.Title, MIMEType: c.MIMEType})
			notes = append(notes, link(c.URI, firstOf(c.Title, c.Name, c.URI)))
		case *sdk.EmbeddedResource:
			if r := c.Resource; r != nil {
				items = append(items, result.Item{Type: "resource", URI: r.URI, MIMEType: r.MIMEType, Text: r.Text, Data: r.Blob})
				notes = append(notes, link(r.URI, r.URI))
			}
		}
	}
	r := result.Result{IsError: res.IsError, Content: strings.Join(texts, "\n\n"), Items: items}
	if res.StructuredContent != nil {
		r.Structured, _ = json.Marshal(res.StructuredContent, jsonread.Legacy)
		if r.Content == "" {
			r.Content = string(r.Structured)
		}
	}
	if len(notes) > 0 {
		r.Markdown = strings.TrimSpace(r.Content + "\n\n" + strings.Join(notes, "\n\n"))
		r.Card = result.CardMarkdown
	}
	if n := r.Size(); int64(n) > s.cfg.MaxResultSize {
		return result.Failure("mcp server %s answered more than max_result_size (%d bytes)", s.cfg.Name, s.cfg.MaxResultSize)
	}
	return r
}

// link is a markdown link to an http(s) URI, or the URI as code.
func link(uri, label string) string {
	if strings.HasPrefix(uri, "https://") || strings.HasPrefix(uri, "http://") {
		return "[" + mdEscape(label) + "](<" + strings.NewReplacer("<", "%3C", ">", "%3E", " ", "%20").Replace(uri) + ">)"
	}
	return "`" + strings.ReplaceAll(uri, "`", "") + "`"
}

var mdEscaper = strings.NewReplacer(`\`, `\\`, "[", `\[`, "]", `\]`, "*", `\*`, "_", `\_`, "`", "\\`", "<", "&lt;", ">", "&gt;")

func mdEscape(s string) string { return mdEscaper.Replace(s) }

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// ReadResource reads a resource of the server, such as the view an MCP
// Apps tool names in _meta.ui.resourceUri, within the timeout and
// max_result_size.
func (s *Server) ReadResource(ctx context.Context, uri string) (*sdk.ReadResourceResult, error) {
	cs, err := s.current(ctx)
	if err != nil {
		return nil, fmt.Errorf("mcp server %s is unavailable: %v", s.cfg.Name, trimName(err, s.cfg.Name))
	}
	st := new(callState)
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, callKey{}, st), s.cfg.Timeout)
	defer cancel()
	res, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
	if err != nil {
		if _, ok := refusal(err); !ok {
			s.setDown(cs, s.failure("reading a resource", err))
			s.wake(s.kick)
		}
		if st.tooLarge.Load() {
			return nil, fmt.Errorf("mcp server %s answered more than max_result_size (%d bytes)", s.cfg.Name, s.cfg.MaxResultSize)
		}
		return nil, fmt.Errorf("mcp server %s: reading %s: %s", s.cfg.Name, uri, reason(err))
	}
	return res, nil
}
