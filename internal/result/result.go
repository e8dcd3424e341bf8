// Package result turns what a handler answered into a tool result with up to
// three channels: content for the model, markdown and embedUrl for the card.
package result

import (
	"bytes"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"golang.org/x/net/html"

	"github.com/toolgate/toolgate/internal/jsonread"
)

// Which channel a card shows.
const (
	CardMarkdown = "markdown"
	CardEmbed    = "embed"
)

// Result is a normalized tool result.
type Result struct {
	IsError  bool   `json:"isError"`
	Content  string `json:"content"`
	Markdown string `json:"markdown,omitempty"`
	EmbedURL string `json:"embedUrl,omitempty"`
	// Card says which channel the card shows: embedUrl wins over markdown.
	Card string `json:"card,omitempty"`
	// Structured is an upstream MCP tool's structuredContent, passed on
	// as it came (docs/mcp-servers.md).
	Structured jsontext.Value `json:"structuredContent,omitempty"`
	// Items are an upstream MCP tool's content besides its text: images,
	// audio and resources, kept for MCP clients.
	Items []Item `json:"items,omitempty"`
}

// Item is a content item of an upstream MCP tool's answer that is not
// text. Type is "image", "audio", "resource_link" or "resource".
type Item struct {
	Type     string `json:"type"`
	MIMEType string `json:"mimeType,omitempty"`
	// Data is an image's or audio's bytes, or a resource's blob.
	Data  []byte `json:"data,omitempty"`
	URI   string `json:"uri,omitempty"`
	Name  string `json:"name,omitempty"`
	Title string `json:"title,omitempty"`
	// Text is a text resource's text.
	Text string `json:"text,omitempty"`
}

// Equal reports whether r and o are the same result.
func (r Result) Equal(o Result) bool {
	return r.IsError == o.IsError && r.Content == o.Content && r.Markdown == o.Markdown && r.EmbedURL == o.EmbedURL &&
		r.Card == o.Card && bytes.Equal(r.Structured, o.Structured) && slices.EqualFunc(r.Items, o.Items, func(a, b Item) bool {
		return a.Type == b.Type && a.MIMEType == b.MIMEType && bytes.Equal(a.Data, b.Data) && a.URI == b.URI &&
			a.Name == b.Name && a.Title == b.Title && a.Text == b.Text
	})
}

// Size is about how many bytes r takes, written: what limits on the size
// of an answer count.
func (r Result) Size() int {
	n := len(r.Content) + len(r.Markdown) + len(r.EmbedURL) + len(r.Structured)
	for _, it := range r.Items {
		n += len(it.Data)*4/3 + len(it.URI) + len(it.Name) + len(it.Title) + len(it.Text) + len(it.MIMEType)
	}
	return n
}

// Failure returns an error result (IsError) whose content, the formatted
// message, the model reads. It is a Result, not a Go error.
func Failure(format string, args ...any) Result {
	return Result{IsError: true, Content: fmt.Sprintf(format, args...)}
}

// maxErrorBody bounds how much of a failing answer's text is quoted.
const maxErrorBody = 1024

// Normalize applies the rules of docs/http-api.md ("What a component
// receives": answers are normalized) to a complete answer. A card is
// an error result here: where cards are allowed, use NormalizeOrCard.
func Normalize(status int, contentType string, body []byte) Result {
	r, _ := NormalizeOrCard(status, contentType, body)
	return r
}

// NormalizeOrCard is Normalize that also reports whether the answer is an
// action-required card, from the same single decode of the body.
func NormalizeOrCard(status int, contentType string, body []byte) (r Result, card bool) {
	jsonBody := IsJSON(contentType)
	if status < 200 || status > 299 {
		return failure(status, contentType, jsonBody, body), false
	}
	if !jsonBody {
		if !utf8.Valid(body) {
			return Failure("handler answered %d bytes that are not UTF-8 text (Content-Type %q)", len(body), contentType), false
		}
		return Result{Content: string(body)}, false
	}
	return fromJSON(body)
}

// FromJSON normalizes a JSON answer with channels.
func FromJSON(body []byte) Result {
	r, _ := fromJSON(body)
	return r
}

// member is one channel of a JSON answer as read: its kind ('"' for a
// string, 'n' for null, 0 when absent) and its string value.
type member struct {
	kind  jsontext.Kind
	value string
}

// fromJSON reads a JSON answer in one pass, without reflection: names are
// matched exactly (after unescaping), other members are skipped.
func fromJSON(body []byte) (Result, bool) {
	var content, markdown, embed member
	isCard := false
	object := false
	err := jsonread.One(body, func(d *jsontext.Decoder) error {
		object = d.PeekKind() == '{'
		if !object {
			return d.SkipValue()
		}
		if _, err := d.ReadToken(); err != nil {
			return err
		}
		for d.PeekKind() != '}' {
			name, err := d.ReadToken()
			if err != nil {
				return err
			}
			key := name.String()
			var m *member
			switch key {
			case "content":
				m = &content
			case "markdown":
				m = &markdown
			case "embedUrl":
				m = &embed
			case "type":
				m = new(member)
			default:
				if err := d.SkipValue(); err != nil {
					return err
				}
				continue
			}
			*m = member{kind: d.PeekKind()}
			if m.kind != '"' {
				if err := d.SkipValue(); err != nil {
					return err
				}
			} else {
				v, err := d.ReadToken()
				if err != nil {
					return err
				}
				m.value = v.String()
			}
			if key == "type" {
				isCard = m.kind == '"' && m.value == CardType
			}
		}
		_, err := d.ReadToken()
		return err
	}, jsonread.Lenient)
	switch {
	case err != nil:
		return Failure("handler answered invalid JSON: %v", err), false
	case !object && bytes.Equal(bytes.TrimSpace(body), []byte("null")):
		return Failure("handler answered JSON null: a JSON answer needs a string \"content\""), false
	case !object:
		return Failure("handler answered JSON that is not an object: a JSON answer needs a string \"content\""), false
	case isCard:
		return Failure("handler answered an action-required card where a tool result was expected"), true
	}
	return channels(content, markdown, embed), false
}

// channels checks the channels of a JSON answer that is not a card.
func channels(content, markdown, embed member) Result {
	switch content.kind {
	case 0:
		return Failure("handler answered JSON without \"content\": a JSON answer needs a string \"content\" for the model")
	case '"':
	default:
		return Failure("handler answered a \"content\" that is not a string")
	}
	r := Result{Content: content.value}
	switch markdown.kind {
	case 0, 'n':
	case '"':
		r.Markdown = markdown.value
	default:
		return Failure("handler answered a \"markdown\" that is not a string")
	}
	switch embed.kind {
	case 0, 'n':
	case '"':
		r.EmbedURL = embed.value
		if err := CheckEmbedURL(r.EmbedURL); err != nil {
			return Failure("handler answered an invalid \"embedUrl\": %v", err)
		}
	default:
		return Failure("handler answered an \"embedUrl\" that is not a string")
	}
	r.Card = cardOf(r)
	return r
}

// EmbedOrigin checks an origin embeds may come from besides the
// components (embed_origins) and returns it as a CSP names it and as
// OriginOf compares it: scheme://host[:port], the host in lower case. It
// goes into the CSP that MCP Apps hosts build from frameDomains, so
// nothing but an http(s) origin is taken: no path, user, wildcard, space,
// quote or semicolon.
func EmbedOrigin(o string) (string, error) {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Opaque != "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" ||
		strings.ContainsAny(u.Host, "*;,'\" \t\r\n") {
		return "", fmt.Errorf("embed origin %q must be scheme://host[:port] (http or https; no path, user or wildcard)", o)
	}
	return u.Scheme + "://" + strings.ToLower(u.Host), nil
}

// OriginOf is an absolute http(s) URL's origin as EmbedOrigin writes
// one: scheme://host[:port], the host in lower case, the port as given.
func OriginOf(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return strings.ToLower(p.Scheme) + "://" + strings.ToLower(p.Host)
}

// CheckEmbedURL reports whether u is an absolute http(s) URL with a host.
func CheckEmbedURL(u string) error {
	p, err := url.Parse(u)
	if err != nil {
		return fmt.Errorf("%q does not parse: %v", u, err)
	}
	if (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return fmt.Errorf("%q is not an absolute http(s) URL", u)
	}
	return nil
}

func cardOf(r Result) string {
	switch {
	case r.EmbedURL != "":
		return CardEmbed
	case r.Markdown != "":
		return CardMarkdown
	}
	return ""
}

// failure turns a non-2xx answer into an error result, carrying a domain
// error's code and message, or a bounded quote of a text answer.
func failure(status int, contentType string, jsonBody bool, body []byte) Result {
	head := strings.TrimSpace(fmt.Sprintf("handler answered %d %s", status, http.StatusText(status)))
	if jsonBody {
		var de struct {
			Code  *string `json:"code"`
			Error *string `json:"error"`
		}
		if jsonread.UnmarshalAnyCase(body, &de) == nil && de.Code != nil && de.Error != nil {
			return Failure("%s: %s: %s", head, bounded(*de.Code), bounded(*de.Error))
		}
	}
	text := ErrorText(contentType, body)
	if text == "" {
		return Failure("%s", head)
	}
	return Failure("%s: %s", head, text)
}

// maxErrorText bounds, in characters, what the model reads of a failing
// answer that is no domain error: its first line, an error message's
// length; what follows (a stack trace, a page of HTML) is the gateway's
// log's to keep, not the model's to read.
const maxErrorText = 200

// ErrorText is what the model reads of a failing answer's body: for HTML
// its text (no markup, scripts or styles), for other text its first
// non-empty line, with runs of white space made one space, at most
// maxErrorText characters; "" when nothing readable is left (an empty
// body, invalid UTF-8).
func ErrorText(contentType string, body []byte) string {
	if !utf8.Valid(body) {
		return ""
	}
	var text []byte
	if isHTML(contentType, body) {
		text = htmlText(body)
	} else {
		for line := range bytes.Lines(body) {
			if len(bytes.TrimSpace(line)) != 0 {
				text = line
				break
			}
		}
	}
	// Folded field by field, and only as far as maxErrorText characters:
	// a line of a megabyte is not folded whole to quote its start.
	var b strings.Builder
	n := 0
	for f := range bytes.FieldsSeq(text) {
		if n > 0 {
			if n == maxErrorText {
				return b.String() + "…"
			}
			b.WriteByte(' ')
			n++
		}
		for _, r := range string(f) {
			if n == maxErrorText {
				return b.String() + "…"
			}
			b.WriteRune(r)
			n++
		}
	}
	return b.String()
}

// errorTextScan bounds, in bytes, the text htmlText gathers: enough for
// maxErrorText characters.
const errorTextScan = 4 * maxErrorText * utf8.UTFMax

// isHTML reports whether a body is an HTML page: by its type, or, as
// error pages often come with none or text/plain, by how it starts.
func isHTML(contentType string, body []byte) bool {
	if mt, _, _ := mime.ParseMediaType(contentType); mt == "text/html" || mt == "application/xhtml+xml" {
		return true
	}
	start := bytes.ToLower(bytes.TrimSpace(body[:min(len(body), 64)]))
	return bytes.HasPrefix(start, []byte("<!doctype html")) || bytes.HasPrefix(start, []byte("<html"))
}

// htmlText is an HTML page's text, without its scripts and styles, up to
// about errorTextScan bytes.
func htmlText(body []byte) []byte {
	z := html.NewTokenizer(bytes.NewReader(body))
	var b bytes.Buffer
	skip := 0 // inside <script> or <style>
	for {
		switch z.Next() {
		case html.ErrorToken:
			return b.Bytes()
		case html.StartTagToken:
			if name, _ := z.TagName(); string(name) == "script" || string(name) == "style" {
				skip++
			}
		case html.EndTagToken:
			if name, _ := z.TagName(); (string(name) == "script" || string(name) == "style") && skip > 0 {
				skip--
			}
		case html.TextToken:
			if skip == 0 {
				b.Write(z.Text())
				b.WriteByte(' ')
			}
		}
		if b.Len() > errorTextScan {
			return b.Bytes()
		}
	}
}

// bounded cuts text quoted from a failing answer to maxErrorBody bytes, on
// a rune boundary.
func bounded(text string) string {
	if len(text) <= maxErrorBody {
		return text
	}
	cut := maxErrorBody
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut] + "…"
}

// IsJSON reports whether a content type (or media type) is JSON:
// application/json, or a +json type such as application/problem+json.
func IsJSON(contentType string) bool {
	switch contentType {
	case "":
		return false
	case "application/json":
		// The usual answer, known without parsing (ParseMediaType makes a
		// map for the parameters).
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil && err != mime.ErrInvalidMediaParameter {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}
