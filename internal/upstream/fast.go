package upstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// sessionless is the first revision whose requests each stand alone: no
// session, the protocol version and the client in each request's _meta.
const sessionless = "2026-07-28"

// Keys of the _meta every request of the sessionless revision carries.
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientInfo         = "io.modelcontextprotocol/clientInfo"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
)

// maxTrailer bounds what fastCall reads after the answer to keep the
// connection.
const maxTrailer = 64 << 10

// fastCalls counts the ids of the requests fastCall sends.
var fastCalls atomic.Int64

// rpcRequest is a JSON-RPC request of tools/call.
type rpcRequest struct {
	JSONRPC string              `json:"jsonrpc"`
	ID      int64               `json:"id"`
	Method  string              `json:"method"`
	Params  *sdk.CallToolParams `json:"params"`
}

// rpcResponse is a JSON-RPC message as fastCall reads it: the answer to
// its request, or anything else the server sends first (skipped).
type rpcResponse struct {
	ID     jsontext.Value `json:"id"`
	Result *wireResult    `json:"result"`
	Error  *jsonrpc.Error `json:"error"`
}

// wireResult is a tools/call result as fastCall reads it, in the same
// pass as the message around it: what the gateway maps onto its channels.
// A result that asks for input is read again by the SDK's types
// (needsInput), which know every kind of input request.
type wireResult struct {
	Content           []wireContent  `json:"content"`
	StructuredContent jsontext.Value `json:"structuredContent"`
	IsError           bool           `json:"isError"`
	ResultType        string         `json:"resultType"`
	InputRequests     jsontext.Value `json:"inputRequests"`
}

// wireContent is a content item of any kind.
type wireContent struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Data     []byte `json:"data"`
	MIMEType string `json:"mimeType"`
	URI      string `json:"uri"`
	Name     string `json:"name"`
	Title    string `json:"title"`
	Resource *struct {
		URI      string `json:"uri"`
		MIMEType string `json:"mimeType"`
		Text     string `json:"text"`
		Blob     []byte `json:"blob"`
	} `json:"resource"`
}

func (r *wireResult) needsInput() bool {
	return r.ResultType == "input_required" || len(r.InputRequests) > 0 && string(r.InputRequests) != "null"
}

// sdkResult is r as the SDK's type, for the mapping every call shares.
func (r *wireResult) sdkResult() *sdk.CallToolResult {
	out := &sdk.CallToolResult{IsError: r.IsError, Content: make([]sdk.Content, 0, len(r.Content))}
	if len(r.StructuredContent) > 0 && string(r.StructuredContent) != "null" {
		out.StructuredContent = r.StructuredContent
	}
	for _, c := range r.Content {
		switch c.Type {
		case "text":
			out.Content = append(out.Content, &sdk.TextContent{Text: c.Text})
		case "image":
			out.Content = append(out.Content, &sdk.ImageContent{Data: c.Data, MIMEType: c.MIMEType})
		case "audio":
			out.Content = append(out.Content, &sdk.AudioContent{Data: c.Data, MIMEType: c.MIMEType})
		case "resource_link":
			out.Content = append(out.Content, &sdk.ResourceLink{URI: c.URI, Name: c.Name, Title: c.Title, MIMEType: c.MIMEType})
		case "resource":
			if r := c.Resource; r != nil {
				out.Content = append(out.Content, &sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: r.URI, MIMEType: r.MIMEType, Text: r.Text, Blob: r.Blob}})
			}
		}
	}
	return out
}

// fastCall sends one tools/call to a server of the sessionless revision
// over HTTP itself: one POST, the answer read in one pass and its result
// decoded once, where the SDK's client decodes each answer several times
// (it costs a few hundred microseconds a call). It sends what the SDK's
// client sends: the request, the protocol's headers, and the version and
// the client in _meta. Tools whose schemas bind arguments to headers
// (x-mcp-header) go through the SDK, which writes those headers.
//
// A server's JSON-RPC error is returned as a *jsonrpc.Error; any other
// error is the transport's.
func (s *Server) fastCall(ctx context.Context, version string, p *sdk.CallToolParams) (*sdk.CallToolResult, error) {
	meta := make(sdk.Meta, len(p.Meta)+3)
	for k, v := range p.Meta {
		meta[k] = v
	}
	meta[metaProtocolVersion] = version
	meta[metaClientInfo] = s.impl
	meta[metaClientCapabilities] = struct{}{}
	params := *p
	params.Meta = meta
	id := fastCalls.Add(1)
	body, err := json.Marshal(&rpcRequest{JSONRPC: "2.0", ID: id, Method: "tools/call", Params: &params})
	if err != nil {
		return nil, err
	}
	endpoint, _ := s.cfg.endpoint()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	h := req.Header
	h["Content-Type"] = []string{"application/json"}
	h["Accept"] = []string{"application/json, text/event-stream"}
	h["Mcp-Protocol-Version"] = []string{version}
	h["Mcp-Method"] = []string{"tools/call"}
	h["Mcp-Name"] = []string{p.Name}
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() {
		// What follows the answer (the end of the event stream) is read
		// too, so that the connection is kept for the next call rather
		// than closed half read.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxTrailer))
		resp.Body.Close()
	}()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("the server answered HTTP %d", resp.StatusCode)
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var msg []byte
	switch mediaType {
	case "application/json":
		if msg, err = io.ReadAll(resp.Body); err != nil {
			return nil, err
		}
		return decodeAnswer(msg, id)
	case "text/event-stream":
		return readEvents(resp.Body, id)
	}
	return nil, fmt.Errorf("the server answered Content-Type %q", mediaType)
}

// readEvents reads a server-sent event stream until the answer to id.
func readEvents(body io.Reader, id int64) (*sdk.CallToolResult, error) {
	r := bufio.NewReader(body)
	var data []byte
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long data line: copied out of the buffer, which the
			// rest of it is read into.
			long := append([]byte(nil), line...)
			rest, rerr := r.ReadBytes('\n')
			line, err = append(long, rest...), rerr
		}
		if err != nil && len(line) == 0 {
			if errors.Is(err, io.EOF) {
				return nil, errors.New("the stream ended without an answer")
			}
			return nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			// The end of an event: is it the answer?
			if len(data) > 0 {
				if res, err, ours := answerIn(data, id); ours {
					return res, err
				}
				data = data[:0]
			}
		case bytes.HasPrefix(line, []byte("data:")):
			v := bytes.TrimPrefix(line[len("data:"):], []byte(" "))
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, v...)
		}
		if err != nil {
			return nil, errors.New("the stream ended without an answer")
		}
	}
}

// answerIn reads one message of the stream: ours reports whether it is
// the answer to id.
func answerIn(data []byte, id int64) (*sdk.CallToolResult, error, bool) {
	var m rpcResponse
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("the server sent an event that is not JSON-RPC: %v", err), true
	}
	if !isID(m.ID, id) || m.Result == nil && m.Error == nil {
		return nil, nil, false
	}
	res, err := resultOf(m, data)
	return res, err, true
}

// decodeAnswer reads a JSON answer to id.
func decodeAnswer(msg []byte, id int64) (*sdk.CallToolResult, error) {
	var m rpcResponse
	if err := json.Unmarshal(msg, &m); err != nil {
		return nil, fmt.Errorf("the server's answer is not JSON-RPC: %v", err)
	}
	if !isID(m.ID, id) {
		return nil, fmt.Errorf("the server answered another request (id %s)", m.ID)
	}
	return resultOf(m, msg)
}

// resultOf is the result of m, read from msg.
func resultOf(m rpcResponse, msg []byte) (*sdk.CallToolResult, error) {
	switch {
	case m.Error != nil:
		return nil, m.Error
	case m.Result == nil:
		return nil, errors.New("the server's answer has no result")
	case !m.Result.needsInput():
		return m.Result.sdkResult(), nil
	}
	var full struct {
		Result *sdk.CallToolResult `json:"result"`
	}
	if err := json.Unmarshal(msg, &full); err != nil || full.Result == nil {
		return nil, fmt.Errorf("the server's input requests do not read: %v", err)
	}
	return full.Result, nil
}

func isID(raw jsontext.Value, id int64) bool {
	return strings.TrimSpace(string(raw)) == fmt.Sprint(id)
}
