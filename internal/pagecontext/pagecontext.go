// Package pagecontext renders the page's readables — small facts a page
// registers — into the block appended to a user message, within the limits
// given in docs/http-api.md, "Page context".
package pagecontext

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/jsonread"
)

// Limits per message.
const (
	MaxItems = 32
	// MaxBytes bounds the names plus the values as rendered, escapes
	// included: what the model reads is what is counted.
	MaxBytes = 4096
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// Item is one readable, in registration order (oldest first).
type Item struct {
	Name string `json:"name"`
	// Value is a JSON string or any JSON value, as the page wrote it.
	Value jsontext.Value `json:"value"`
}

// Snapshot is a rendered snapshot.
type Snapshot struct {
	// Text is the block to append to the user message; empty when no item
	// remains.
	Text string `json:"text"`
	// Dropped names the items left out to meet the limits, oldest first.
	Dropped []string `json:"dropped"`
}

// plain is a value's text before it is made safe: a string decoded,
// anything else compact JSON in the order received whose strings carry
// only the escapes JSON requires (quote, backslash, control characters).
// A page's \u003c is thus a '<' here, and safeText escapes it like any
// other. Values are read leniently (jsonread.Lenient) where nothing is
// lost by it: invalid UTF-8 becomes U+FFFD (safeText would do so anyway)
// and a repeated object name is kept as sent.
func plain(v jsontext.Value) ([]byte, error) {
	var out []byte
	err := jsonread.One(v, func(d *jsontext.Decoder) error {
		if d.PeekKind() == '"' {
			tok, err := d.ReadToken()
			out = []byte(tok.String())
			return err
		}
		var buf bytes.Buffer
		enc := jsontext.NewEncoder(&buf, jsonread.Lenient)
		for {
			tok, err := d.ReadToken()
			if err != nil {
				return err
			}
			if tok.Kind() == '"' {
				// Write the decoded string, not the page's raw escapes.
				tok = jsontext.String(tok.String())
			}
			if err := enc.WriteToken(tok); err != nil {
				return err
			}
			if d.StackDepth() == 0 {
				// The encoder ends a top-level value with a newline.
				out = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
				return nil
			}
		}
	}, jsonread.Lenient)
	return out, err
}

// appendSafe appends text so that it cannot close the block or pass for
// anything but the page's words:
//   - format characters (Unicode Cf: bidi controls, zero-width characters,
//     tags, the BOM) are dropped: they change how text reads without
//     being seen;
//   - '<', '>', '&', their compatibility forms (fullwidth and small, which
//     NFKC folds to them) and the characters that look like '<' and '>'
//     (ltForms, gtForms) become &lt; &gt; &amp;: a model reads a
//     lookalike tag as a tag;
//   - a line break (LF, CR, VT, FF, NEL, U+2028, U+2029) becomes its
//     numeric reference, &#10; and so on: a value stays on its item's
//     line, and no line of it can pass for one of the gateway's;
//   - a backslash that starts \u, \U, \x or \X becomes &#92;, so that
//     \u003c and its kin never spell a '<' in any case;
//   - invalid UTF-8 becomes U+FFFD.
func appendSafe(dst []byte, text []byte) []byte {
	start := len(dst)
	for len(text) > 0 {
		r, size := utf8.DecodeRune(text)
		text = text[size:]
		switch {
		case strings.ContainsRune(ltForms, r):
			dst = append(dst, "&lt;"...)
			continue
		case strings.ContainsRune(gtForms, r):
			dst = append(dst, "&gt;"...)
			continue
		case r == '&' || r == '\uFF06' || r == '\uFE60':
			dst = append(dst, "&amp;"...)
			continue
		case strings.ContainsRune(lineBreaks, r):
			dst = append(dst, "&#"...)
			dst = strconv.AppendInt(dst, int64(r), 10)
			dst = append(dst, ';')
			continue
		case r == 'u' || r == 'U' || r == 'x' || r == 'X':
			// The rune kept before this one: a dropped format character
			// must not join a backslash to its u.
			if len(dst) > start && dst[len(dst)-1] == '\\' {
				dst = append(dst[:len(dst)-1], "&#92;"...)
			}
		}
		if unicode.Is(unicode.Cf, r) {
			continue
		}
		dst = utf8.AppendRune(dst, r)
	}
	return dst
}

// ltForms and gtForms are '<' and '>' and what reads as them: the
// fullwidth and small forms, modifier letter arrowheads (U+02C2/3), single
// angle quotation marks (U+2039/203A), angle brackets (U+2329/232A,
// U+3008/3009, U+27E8/27E9, U+FE3F/FE40 vertical), ornaments
// (U+276C/276D, U+276E/276F, U+2770/2771) and the Canadian syllabics
// PA and PO (U+1438, U+1433).
const (
	ltForms = "<\uFF1C\uFE64\u02C2\u2039\u2329\u3008\u27E8\uFE3F\u276C\u276E\u2770\u1438"
	gtForms = ">\uFF1E\uFE65\u02C3\u203A\u232A\u3009\u27E9\uFE40\u276D\u276F\u2771\u1433"
)

// lineBreaks are the characters that end a line somewhere.
const lineBreaks = "\n\r\v\f\u0085\u2028\u2029"

// Render checks the items and renders those that fit: over a limit, the
// oldest are dropped first until both hold.
func Render(items []Item) (Snapshot, error) {
	vals := make([][]byte, len(items))
	seen := make(map[string]bool, len(items))
	for i, it := range items {
		if !nameRE.MatchString(it.Name) {
			return Snapshot{}, fmt.Errorf("items[%d]: name %q must match %s", i, it.Name, nameRE)
		}
		if seen[it.Name] {
			return Snapshot{}, fmt.Errorf("items[%d]: name %q appears twice", i, it.Name)
		}
		seen[it.Name] = true
		v, err := plain(it.Value)
		if err == io.EOF {
			err = errors.New("no value")
		}
		if err != nil {
			return Snapshot{}, fmt.Errorf("items[%d] (%s): value is not JSON: %v", i, it.Name, err)
		}
		vals[i] = appendSafe(nil, v)
	}

	size := 0
	for i, it := range items {
		size += len(it.Name) + len(vals[i])
	}
	first := 0
	for first < len(items) && (len(items)-first > MaxItems || size > MaxBytes) {
		size -= len(items[first].Name) + len(vals[first])
		first++
	}
	snap := Snapshot{Dropped: make([]string, 0, first)}
	for _, it := range items[:first] {
		snap.Dropped = append(snap.Dropped, it.Name)
	}
	if first == len(items) {
		return snap, nil
	}
	var b strings.Builder
	b.WriteString("<page_context untrusted=\"true\">\n")
	for i := first; i < len(items); i++ {
		b.WriteString(`<item name="`)
		b.WriteString(items[i].Name) // the name pattern admits nothing to escape
		b.WriteString(`">`)
		b.Write(vals[i])
		b.WriteString("</item>\n")
	}
	b.WriteString("</page_context>")
	snap.Text = b.String()
	return snap, nil
}
