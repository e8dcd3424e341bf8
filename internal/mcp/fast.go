package mcp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/jsonread"
)

// The fast path serves the commonest request of the sessionless revision,
// a tools/call of a gateway tool, without the SDK's per-request session
// (a jsonrpc2 connection, its goroutines, its decoder's large buffers).
// It takes a request only when it can tell the SDK would serve it, and
// answers it with the SDK's bytes; anything else (a batch, another method,
// a card's answer, a refusal, an odd id or key) goes to the SDK unchanged,
// body and all, so that every refusal is the SDK's own.

// fastVersion is the one revision the fast path knows: a later one goes
// to the SDK, which knows what it changed.
const fastVersion = "2026-07-28"

// maxFastDepth bounds the nesting the fast path reads; deeper bodies go
// to the SDK (which allows 1000).
const maxFastDepth = 64

// fastCall is a tools/call request as the fast path decoded it. Its
// byte slices are the request body's.
type fastCall struct {
	id   jsonrpc.ID
	name string
	args jsontext.Value
	// meta is _meta as the SDK decodes it, but for the members the
	// sessionless revision defines (the SDK's MetaKey constants), which
	// callTool does not read: they are kept as they came, for capsCache;
	// hasInfo tells a clientInfo of null from none.
	meta                            sdk.Meta
	version, clientCaps, clientInfo []byte
	hasInfo                         bool
}

// serveFast serves r if it is a sessionless tools/call the fast path
// takes, and reports whether it did. When it did not, r's body is as it
// was, for the SDK.
func (s *Server) serveFast(w http.ResponseWriter, r *http.Request) bool {
	if !fastHeaders(r.Header) || r.Method != http.MethodPost {
		return false
	}
	body, ok := s.readFast(r)
	if !ok {
		return false
	}
	fc, ok := decodeCall(body)
	if !ok || !s.index.Load().fast[fc.name] || fc.name != r.Header.Get("Mcp-Name") {
		return false
	}
	caps, ok := s.caps.sessionless(fc.version, fc.clientCaps, fc.clientInfo, fc.hasInfo)
	if !ok {
		return false
	}
	req := &sdk.CallToolRequest{
		Params: &sdk.CallToolParamsRaw{Meta: fc.meta, Name: fc.name, Arguments: []byte(fc.args)},
		Extra:  &sdk.RequestExtra{TokenInfo: auth.TokenInfoFromContext(r.Context()), Header: r.Header},
	}
	// As in the SDK's stateless path, the call outlives a client that
	// hangs up: it may have reached the component already.
	s.fastCalls.Add(1)
	res, err := s.finish(s.callTool(context.WithoutCancel(r.Context()), req, caps))
	s.writeFast(w, fc.id, res, err)
	return true
}

// fastHeaders checks the headers the SDK checks before it reads a body:
// the revision, Content-Type, Accept (both types), no Last-Event-ID, and
// the Mcp-Method and Mcp-Name of a tools/call.
func fastHeaders(h http.Header) bool {
	if h.Get("Mcp-Protocol-Version") != fastVersion || h.Get("Mcp-Method") != "tools/call" || h.Get("Mcp-Name") == "" {
		return false
	}
	if len(h.Values("Last-Event-ID")) > 0 {
		return false
	}
	if mt, _, err := mime.ParseMediaType(h.Get("Content-Type")); err != nil || mt != "application/json" {
		return false
	}
	jsonOK, streamOK := accepts(h.Values("Accept"))
	return jsonOK && streamOK
}

// accepts reads Accept as the SDK does: whether it takes JSON and an
// event stream, wildcards included.
func accepts(values []string) (jsonOK, streamOK bool) {
	for _, value := range values {
		for _, raw := range strings.Split(value, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK, streamOK
}

// readFast reads the body within the SDK's limit. A body over it, empty,
// or unreadable is left for the SDK to refuse: r.Body then gives the same
// bytes again, and what was not read yet. A Body not read yet is taken in
// place.
func (s *Server) readFast(r *http.Request) ([]byte, bool) {
	if r.Body == nil || s.maxBody < 0 {
		return nil, false
	}
	if b, ok := r.Body.(*Body); ok && b.Len() == len(b.b) {
		return b.b, len(b.b) > 0 && int64(len(b.b)) <= s.maxBody
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, s.maxBody+1))
	if err != nil || len(body) == 0 || int64(len(body)) > s.maxBody {
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		return nil, false
	}
	r.Body = NewBody(body)
	return body, true
}

// Body is a request body read whole before the MCP server sees it, which
// the fast path reads in place rather than copy: the bytes are the
// request's until ServeHTTP returns, and are not changed meanwhile.
// Nothing the fast path takes from them outlives the call: it copies the
// name, the id and _meta's values, and the gateway reads the arguments
// during Invoke (it decodes them, and keeps a digest). The SDK reads a
// Body as any other, and keeps a copy.
type Body struct {
	bytes.Reader
	b []byte
}

// NewBody is a Body of b.
func NewBody(b []byte) *Body {
	body := &Body{b: b}
	body.Reset(b)
	return body
}

// Close does nothing: the bytes are the caller's.
func (*Body) Close() error { return nil }

// capsCache remembers, by their bytes, the client capabilities and client
// info of the sessionless _meta as the SDK decoded them: a client sends
// the same ones on every request, and the SDK's decoder allocates tens of
// kilobytes each time. It holds small values only, and starts over when
// full, so that no client can make it grow.
type capsCache struct {
	mu sync.Mutex
	m  map[string]capsEntry
}

type capsEntry struct {
	caps *sdk.ClientCapabilities
	ok   bool
}

const (
	capsCacheSize = 256
	capsCacheKey  = 2048 // bytes of _meta members at most, per entry
)

// sessionless checks the _meta of the sessionless revision as the SDK
// does (its protocolVersion, the clientCapabilities it requires, the
// clientInfo it allows, each decoded by the SDK itself), and returns the
// capabilities.
func (c *capsCache) sessionless(version, rawCaps, info []byte, hasInfo bool) (*sdk.ClientCapabilities, bool) {
	if string(version) != `"`+fastVersion+`"` {
		return nil, false
	}
	key := string(rawCaps) + "\x00" + string(info)
	if hasInfo {
		key += "\x00"
	}
	c.mu.Lock()
	e, hit := c.m[key]
	c.mu.Unlock()
	if hit {
		return e.caps, e.ok
	}
	e = decodeCaps(rawCaps, info, hasInfo)
	if len(key) <= capsCacheKey {
		c.mu.Lock()
		if c.m == nil || len(c.m) >= capsCacheSize {
			c.m = map[string]capsEntry{}
		}
		c.m[key] = e
		c.mu.Unlock()
	}
	return e.caps, e.ok
}

// decodeCaps has the SDK decode the client's capabilities and info.
func decodeCaps(rawCaps, info jsontext.Value, hasInfo bool) capsEntry {
	meta := sdk.Meta{}
	for k, raw := range map[string]jsontext.Value{sdk.MetaKeyClientCapabilities: rawCaps, sdk.MetaKeyClientInfo: info} {
		var v any
		if raw != nil && jsonread.UnmarshalAnyCase(raw, &v) != nil {
			return capsEntry{}
		}
		if raw != nil {
			meta[k] = v
		}
	}
	req := &sdk.CallToolRequest{Params: &sdk.CallToolParamsRaw{Meta: meta}}
	if hasInfo && req.ClientInfo() == nil {
		return capsEntry{}
	}
	caps := req.ClientCapabilities()
	return capsEntry{caps: caps, ok: caps != nil}
}

// decodeCall decodes body as one JSON-RPC tools/call with params name,
// arguments (an object) and _meta, and nothing else. It refuses (false)
// whatever it cannot be sure the SDK reads the same way: invalid UTF-8,
// escaped surrogates, duplicate keys, keys of another case or with
// escapes, nesting deeper than maxFastDepth, an id that is not a small
// integer or a plain string.
//
// It reads the body once, with jsontext, which refuses repeated names and
// invalid UTF-8 (unpaired surrogate escapes included) by default; the
// members are taken as they are in the body, and only the values of _meta
// are decoded, as encoding/json decodes them into the SDK's Meta.
func decodeCall(body []byte) (fastCall, bool) {
	var fc fastCall
	if hasSurrogateEscape(body) {
		return fc, false
	}
	var hasVersion, hasMethod, hasID, hasParams bool
	err := jsonread.One(body, func(dec *jsontext.Decoder) error {
		return readObject(dec, body, func(name []byte) error {
			if string(name) == "params" {
				hasParams = true
				return readParams(dec, body, &fc)
			}
			v, err := readValue(dec, body, 1)
			if err != nil {
				return err
			}
			switch string(name) {
			case "jsonrpc":
				hasVersion = string(v) == `"2.0"`
			case "method":
				hasMethod = string(v) == `"tools/call"`
			case "id":
				fc.id, hasID = decodeID(v)
			default:
				return errNotStrict
			}
			return nil
		})
	})
	ok := err == nil && hasVersion && hasMethod && hasID && hasParams && fc.name != "" && fc.meta != nil
	return fc, ok
}

// readParams reads the params of a tools/call with dec, which reads body.
func readParams(dec *jsontext.Decoder, body []byte, fc *fastCall) error {
	return readObject(dec, body, func(name []byte) error {
		if string(name) == "_meta" {
			return readMeta(dec, body, fc)
		}
		v, err := readValue(dec, body, 2)
		switch {
		case err != nil:
			return err
		case string(name) == "name" && plainString(v):
			fc.name = string(v[1 : len(v)-1])
		case string(name) == "arguments" && isObject(v):
			fc.args = v
		default:
			return errNotStrict
		}
		return nil
	})
}

// readMeta reads _meta with dec, which reads body: the members of the
// sessionless revision as they are, and every other member as
// encoding/json decodes it into the SDK's Meta.
func readMeta(dec *jsontext.Decoder, body []byte, fc *fastCall) error {
	fc.meta = sdk.Meta{}
	return readObject(dec, body, func(name []byte) error {
		v, err := readValue(dec, body, 3)
		if err != nil {
			return err
		}
		switch string(name) {
		case sdk.MetaKeyProtocolVersion:
			fc.version = v
			return nil
		case sdk.MetaKeyClientCapabilities:
			fc.clientCaps = v
			return nil
		case sdk.MetaKeyClientInfo:
			fc.clientInfo, fc.hasInfo = v, true
			return nil
		}
		var x any
		if plainString(v) {
			x = string(v[1 : len(v)-1])
		} else if err := jsonread.UnmarshalAnyCase(v, &x); err != nil {
			return err
		}
		fc.meta[string(name)] = x
		return nil
	})
}

// readObject reads an object with dec, which reads src, calling member
// with each name, unquoted, for it to read the value. A name with escapes
// or characters a plain string has not is refused.
func readObject(dec *jsontext.Decoder, src []byte, member func(name []byte) error) error {
	if dec.PeekKind() != '{' {
		return errNotStrict
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for dec.PeekKind() == '"' {
		name, err := readValue(dec, src, 0)
		if err != nil {
			return err
		}
		if !plainString(name) {
			return errNotStrict
		}
		if err := member(name[1 : len(name)-1]); err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}

// readValue reads the next value with dec, which reads src, as the bytes
// of src it spans. within is how many objects or arrays around it src
// began in: the value may nest maxFastDepth-within deep.
func readValue(dec *jsontext.Decoder, src []byte, within int) ([]byte, error) {
	v, err := dec.ReadValue()
	if err != nil {
		return nil, err
	}
	end := int(dec.InputOffset())
	v = src[end-len(v) : end]
	if !nestsWithin(v, maxFastDepth-within) {
		return nil, errNotStrict
	}
	return v, nil
}

// nestsWithin reports whether v, valid JSON, nests objects and arrays at
// most depth deep.
func nestsWithin(v []byte, depth int) bool {
	d, inString, escaped := 0, false, false
	for _, c := range v {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if d++; d > depth {
				return false
			}
		case c == '}' || c == ']':
			d--
		}
	}
	return true
}

// decodeID takes an integer the SDK's float64 holds exactly, or a string
// without escapes or control characters, which encodes back as it came.
func decodeID(raw jsontext.Value) (jsonrpc.ID, bool) {
	if plainString(raw) {
		id, err := jsonrpc.MakeID(string(raw[1 : len(raw)-1]))
		return id, err == nil
	}
	digits := raw
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 15 || digits[0] == '0' && len(digits) > 1 {
		return jsonrpc.ID{}, false
	}
	var n float64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return jsonrpc.ID{}, false
		}
		n = n*10 + float64(c-'0')
	}
	if raw[0] == '-' {
		n = -n
	}
	id, err := jsonrpc.MakeID(n)
	return id, err == nil
}

// plainString reports whether raw is a JSON string of printable ASCII
// without escapes: one every decoder reads, and every encoder writes, the
// same.
func plainString(raw jsontext.Value) bool {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return false
	}
	for _, c := range raw[1 : len(raw)-1] {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

func isObject(raw jsontext.Value) bool { return len(raw) > 0 && raw[0] == '{' }

// hasSurrogateEscape reports a \uD800-\uDFFF escape, which decoders may
// read differently when it is unpaired.
func hasSurrogateEscape(body []byte) bool {
	for i := 0; i+2 < len(body); i++ {
		if body[i] == '\\' && body[i+1] == 'u' && (body[i+2] == 'd' || body[i+2] == 'D') {
			return true
		}
	}
	return false
}

// errNotStrict is decodeCall's refusal of a body it reads.
var errNotStrict = errors.New("not for the fast path")

// finish does to a tools/call's outcome what the SDK does before it
// answers on the sessionless revision: it refuses a result with both
// content and input requests, types the result (input_required or
// complete), gives a complete one non-null content, and names the server
// in _meta.
func (s *Server) finish(res *sdk.CallToolResult, err error) (*sdk.CallToolResult, error) {
	if err != nil {
		return nil, err
	}
	if res == nil {
		// call never answers nothing; were it to, the SDK's message is
		// its own.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "tools/call returned no result"}
	}
	needsInput := res.InputRequests != nil
	if needsInput && (len(res.Content) > 0 || res.StructuredContent != nil) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "server bug: result has both content and inputRequests"}
	}
	out := withResultType(res, needsInput)
	if out.Content == nil && !needsInput {
		out.Content = []sdk.Content{}
	}
	if out.Meta == nil {
		out.Meta = sdk.Meta{}
	}
	if _, ok := out.Meta[sdk.MetaKeyServerInfo]; !ok {
		out.Meta[sdk.MetaKeyServerInfo] = s.impl
	}
	return out, nil
}

// Results typed complete and input_required. The SDK keeps the type in an
// unexported field that only its decoder sets: these are decoded once,
// and copied.
var completeResult, inputResult = typedResult("complete"), typedResult("input_required")

func typedResult(t string) sdk.CallToolResult {
	var r sdk.CallToolResult
	if err := json.Unmarshal([]byte(`{"content":[],"resultType":"`+t+`"}`), &r); err != nil {
		panic(err)
	}
	return r
}

// withResultType is res typed as needsInput says.
func withResultType(res *sdk.CallToolResult, needsInput bool) *sdk.CallToolResult {
	out := completeResult
	if needsInput {
		out = inputResult
	}
	out.Meta = res.Meta
	out.Content = res.Content
	out.StructuredContent = res.StructuredContent
	out.IsError = res.IsError
	out.InputRequests = res.InputRequests
	out.RequestState = res.RequestState
	return &out
}

// writeFast answers as the SDK's stateless transport does: the response
// as one server-sent event, or an error the revision maps to an HTTP
// status as a bare JSON body with that status.
//
// The event is written once and not flushed: the handler returns right
// after, and net/http then sends it with a Content-Length in one write,
// where a flush would send it chunked, the final chunk in a write of its
// own. The bytes the client reads are the same.
func (s *Server) writeFast(w http.ResponseWriter, id jsonrpc.ID, res *sdk.CallToolResult, err error) {
	h := w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", "text/event-stream")
	h.Set("Connection", "keep-alive")
	if err == nil {
		if buf, ok := s.appendEvent(make([]byte, 0, 256+resultSize(res)), id, res); ok {
			_, _ = w.Write(buf)
			return
		}
	}
	resp := &jsonrpc.Response{ID: id}
	var data []byte
	if err != nil {
		resp.Error = err
	} else if raw, merr := marshalNoEscape(res); merr != nil {
		resp.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: merr.Error()}
	} else {
		data = successMessage(id, raw)
	}
	if data == nil {
		data, err = jsonrpc.EncodeMessage(resp)
	}
	if err != nil {
		// The SDK writes nothing it cannot encode, and ends the stream.
		return
	}
	if status := errorStatus(resp.Error); status != 0 {
		h.Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(data)
		return
	}
	buf := make([]byte, 0, len("event: message\ndata: \n\n")+len(data))
	buf = append(buf, "event: message\ndata: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	_, _ = w.Write(buf)
}

// resultSize is about the bytes of res's text content.
func resultSize(res *sdk.CallToolResult) int {
	n := 0
	for _, c := range res.Content {
		if t, ok := c.(*sdk.TextContent); ok {
			n += len(t.Text) + 64
		}
	}
	return n
}

// appendEvent appends the server-sent event of a successful tools/call,
// res, for request id: the bytes marshalNoEscape and successMessage give,
// written directly for the results the gateway's tools give (text content,
// user-audience annotations, isError, the server in _meta, typed
// complete, as finish types a result without input requests), so that
// the text is not marshalled by each level of the
// SDK's MarshalJSON and scanned again by the levels above. Any other
// result (another kind of content, structured content, input requests, a
// state, more _meta) is not appended (false), for marshalNoEscape.
func (s *Server) appendEvent(buf []byte, id jsonrpc.ID, res *sdk.CallToolResult) ([]byte, bool) {
	if res.StructuredContent != nil || res.InputRequests != nil || res.RequestState != "" ||
		len(res.Meta) != 1 || res.Content == nil || res.NeedsInput() {
		return nil, false
	}
	if impl, ok := res.Meta[sdk.MetaKeyServerInfo].(*sdk.Implementation); !ok || impl != s.impl || s.implMeta == nil {
		return nil, false
	}
	buf = append(buf, "event: message\ndata: "...)
	buf, ok := appendID(append(buf, `{"jsonrpc":"2.0","id":`...), id)
	if !ok {
		return nil, false
	}
	buf = append(buf, `,"result":{"_meta":`...)
	buf = append(buf, s.implMeta...)
	buf = append(buf, `,"content":[`...)
	for i, c := range res.Content {
		t, ok := c.(*sdk.TextContent)
		if !ok || t.Meta != nil {
			return nil, false
		}
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"type":"text","text":`...)
		buf = appendString(buf, t.Text)
		switch a := t.Annotations; {
		case a == nil:
		case len(a.Audience) == 1 && a.Audience[0] == "user" && a.LastModified == "" && a.Priority == 0:
			buf = append(buf, `,"annotations":{"audience":["user"]}`...)
		default:
			return nil, false
		}
		buf = append(buf, '}')
	}
	buf = append(buf, ']')
	if res.IsError {
		buf = append(buf, `,"isError":true`...)
	}
	return append(buf, `,"resultType":"complete"}}`+"\n\n"...), true
}

// appendID appends an id the fast path takes (decodeID) as the SDK's
// encoder writes it.
func appendID(buf []byte, id jsonrpc.ID) ([]byte, bool) {
	switch v := id.Raw().(type) {
	case int64:
		return strconv.AppendInt(buf, v, 10), true
	case string:
		buf = append(buf, '"')
		buf = append(buf, v...)
		return append(buf, '"'), true
	}
	return buf, false
}

// appendString appends s as a JSON string, as encoding/json writes it in
// the SDK's MarshalJSON (HTML characters escaped). Text of printable ASCII
// that needs no escape, the common case, is copied; any other goes
// through json with encoding/json's escapes (jsonread.Legacy), and each
// byte of invalid UTF-8 is \ufffd, as encoding/json wrote it, where json
// would write U+FFFD itself.
func appendString(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return appendEscaped(buf, s)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}

func appendEscaped(buf []byte, s string) []byte {
	buf = append(buf, '"')
	for len(s) > 0 {
		n := 0
		for n < len(s) {
			r, size := utf8.DecodeRuneInString(s[n:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			n += size
		}
		if n == 0 {
			buf = append(buf, `\ufffd`...)
			s = s[1:]
			continue
		}
		q, err := json.Marshal(s[:n], jsonread.Legacy)
		if err != nil {
			panic(err) // valid UTF-8 always marshals
		}
		buf = append(buf, q[1:len(q)-1]...)
		s = s[n:]
	}
	return append(buf, '"')
}

// successMessage is the JSON-RPC response of id with result raw, the
// bytes jsonrpc.EncodeMessage writes: raw is compact and unescaped already
// (marshalNoEscape), which the encoder would copy as it is, and an id the
// fast path takes is an integer or a string without escapes (decodeID).
// Written directly, the result is not scanned again.
func successMessage(id jsonrpc.ID, raw []byte) []byte {
	buf, ok := appendID(append(make([]byte, 0, len(`{"jsonrpc":"2.0","id":,"result":}`)+24+len(raw)), `{"jsonrpc":"2.0","id":`...), id)
	if !ok {
		return nil
	}
	buf = append(buf, `,"result":`...)
	buf = append(buf, raw...)
	return append(buf, '}')
}

// errorStatus is the HTTP status the sessionless revision gives a
// protocol error, or 0 for one answered in the stream.
func errorStatus(err error) int {
	var jerr *jsonrpc.Error
	if err == nil || !errors.As(err, &jerr) {
		return 0
	}
	switch jerr.Code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, sdk.CodeUnsupportedProtocolVersion, sdk.CodeMissingRequiredClientCapabilities:
		return http.StatusBadRequest
	}
	return 0
}

// marshalNoEscape marshals v as the SDK's JSON-RPC layer does: without
// HTML escaping, without the encoder's newline, and what a MarshalJSON
// method wrote compacted but with its strings as they were (the SDK's
// types escape HTML themselves).
func marshalNoEscape(v any) (jsontext.Value, error) {
	return json.Marshal(v, jsontext.PreserveRawStrings(true), jsonread.Lenient)
}

// SDKOnly sends every request to the SDK (on) or lets the fast path take
// what it can (off, the default): for tests that compare the fast path's
// answers with the SDK's on one server.
func (s *Server) SDKOnly(on bool) { s.sdkOnly.Store(on) }

// FastCalls counts the requests the fast path served, for tests that
// must know it was taken.
func (s *Server) FastCalls() int64 { return s.fastCalls.Load() }
