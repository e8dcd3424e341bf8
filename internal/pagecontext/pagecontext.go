// Package pagecontext renders the page's readables — small facts a page
// registers — into the block appended to a user message, within the limits
// of SPEC §8.
package pagecontext

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Limits per message.
const (
	MaxItems = 32
	MaxBytes = 4096
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// Item is one readable, in registration order (oldest first).
type Item struct {
	Name string `json:"name"`
	// Value is a JSON string or any JSON value, kept as the page wrote it.
	Value json.RawMessage `json:"value"`
}

// Snapshot is a rendered snapshot.
type Snapshot struct {
	// Text is the block to append to the user message; empty when no item
	// remains.
	Text string `json:"text"`
	// Dropped names the items left out to meet the limits, oldest first.
	Dropped []string `json:"dropped"`
}

// serialized is a value as it counts and renders: a string as is,
// anything else as compact JSON in the order received.
func serialized(v json.RawMessage) (string, error) {
	// Only a JSON string is rendered as is: null would decode into a string
	// too, but it serializes as "null".
	var s string
	if t := bytes.TrimLeft(v, " \t\r\n"); len(t) > 0 && t[0] == '"' && json.Unmarshal(v, &s) == nil {
		return s, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, v); err != nil {
		return "", err
	}
	if buf.Len() == 0 {
		return "", fmt.Errorf("no value")
	}
	return buf.String(), nil
}

// Render checks the items and renders those that fit: over a limit, the
// oldest are dropped first until both hold.
func Render(items []Item) (Snapshot, error) {
	vals := make([]string, len(items))
	seen := make(map[string]bool, len(items))
	for i, it := range items {
		if !nameRE.MatchString(it.Name) {
			return Snapshot{}, fmt.Errorf("items[%d]: name %q must match %s", i, it.Name, nameRE)
		}
		if seen[it.Name] {
			return Snapshot{}, fmt.Errorf("items[%d]: name %q appears twice", i, it.Name)
		}
		seen[it.Name] = true
		v, err := serialized(it.Value)
		if err != nil {
			return Snapshot{}, fmt.Errorf("items[%d] (%s): value is not JSON: %v", i, it.Name, err)
		}
		vals[i] = v
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
		b.WriteString(escape.Replace(vals[i]))
		b.WriteString("</item>\n")
	}
	b.WriteString("</page_context>")
	snap.Text = b.String()
	return snap, nil
}

// escape keeps a value from closing the block: &, < and > become entities.
var escape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
