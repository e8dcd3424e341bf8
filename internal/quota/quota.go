// Package quota reads the limits an operator puts on tool calls ("20/1h
// per user", "1000/1d per install", "5 concurrent per user") and forms the
// ledger limits a call counts against. The counting itself is the store's
// (ledger.Limit): one window for every instance that shares it.
package quota

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/ledger"
)

// Scopes: whose calls a rule counts together.
const (
	// PerUser counts a user's calls in one installation: two
	// installations' users with the same id are two users.
	PerUser = "user"
	// PerInstall counts an installation's calls, all its users together.
	PerInstall = "install"
)

// Bounds of a rule.
const (
	MaxCount  = 1000000
	MaxWindow = 30 * 24 * time.Hour
)

// Rule is one limit as written.
type Rule struct {
	// Max is how many calls the rule lets through.
	Max int
	// Window is the sliding window; 0 counts calls in flight at once.
	Window time.Duration
	// Scope is PerUser or PerInstall.
	Scope string
	// Text is the rule as written, how a refusal names it.
	Text string
}

// Concurrent reports whether r counts calls in flight.
func (r Rule) Concurrent() bool { return r.Window == 0 }

// Parse reads a rule: "N/WINDOW per SCOPE" or "N concurrent per SCOPE",
// N from 1 to MaxCount, WINDOW a positive count and a unit (s, m, h or d:
// "1h", "30m", "1d") or a unit alone ("h" is "1h"), at most MaxWindow,
// SCOPE user or install, one space between words.
func Parse(s string) (Rule, error) {
	r, err := parse(s)
	if err != nil {
		return Rule{}, fmt.Errorf("limit %q: %v", s, err)
	}
	r.Text = s
	return r, nil
}

func parse(s string) (Rule, error) {
	words := strings.Split(s, " ")
	var r Rule
	var count, window string
	switch {
	case len(words) == 4 && words[1] == "concurrent":
		count, words = words[0], append(words[:1], words[2:]...)
	case len(words) == 3 && strings.Contains(words[0], "/"):
		count, window, _ = strings.Cut(words[0], "/")
	default:
		return Rule{}, errors.New(`want "N/WINDOW per user|install" or "N concurrent per user|install"`)
	}
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 || n > MaxCount || count[0] == '+' || count[0] == '0' {
		return Rule{}, fmt.Errorf("%q: the count must be a whole number from 1 to %d", count, MaxCount)
	}
	r.Max = n
	if window != "" || strings.Contains(s, "/") {
		if r.Window, err = parseWindow(window); err != nil {
			return Rule{}, err
		}
	}
	if words[1] != "per" {
		return Rule{}, fmt.Errorf("%q: want per", words[1])
	}
	switch words[2] {
	case PerUser, PerInstall:
		r.Scope = words[2]
	default:
		return Rule{}, fmt.Errorf("%q: the scope is user or install", words[2])
	}
	return r, nil
}

var units = map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}

func parseWindow(w string) (time.Duration, error) {
	if w == "" {
		return 0, errors.New("the window is missing: 20/1h, 30/m, 1000/1d")
	}
	unit, ok := units[w[len(w)-1]]
	if !ok {
		return 0, fmt.Errorf("window %q: the unit is s, m, h or d", w)
	}
	n := 1
	if digits := w[:len(w)-1]; digits != "" {
		var err error
		n, err = strconv.Atoi(digits)
		if err != nil || n < 1 || digits[0] == '+' || digits[0] == '0' {
			return 0, fmt.Errorf("window %q: a positive whole number, then the unit", w)
		}
	}
	if time.Duration(n) > MaxWindow/unit {
		return 0, fmt.Errorf("window %q: at most 30d", w)
	}
	return time.Duration(n) * unit, nil
}

// ParseAll reads rules, refusing two that count the same thing (the same
// window, or both concurrent, and the same scope).
func ParseAll(texts []string) ([]Rule, error) {
	var rules []Rule
	for _, t := range texts {
		r, err := Parse(t)
		if err != nil {
			return nil, err
		}
		for _, o := range rules {
			if o.Window == r.Window && o.Scope == r.Scope {
				return nil, fmt.Errorf("limits %q and %q count the same calls (the same window and scope): keep one", o.Text, r.Text)
			}
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// AllTools is the tool part of the key of a rule set for all tools
// together; a tool's own rules use its name, which cannot be empty.
const AllTools = ""

// OverAllTools reports whether l is a limit of a rule over all tools
// (Limit with AllTools) rather than of one tool's own.
func OverAllTools(l ledger.Limit) bool {
	return strings.HasPrefix(l.Key, AllTools+"\x1f")
}

// Limit is the ledger limit a call of tool (AllTools for a rule over all
// tools) by user in install counts against under r.
func (r Rule) Limit(tool, user, install string) ledger.Limit {
	subject := install
	if r.Scope == PerUser {
		subject = install + "\x1f" + user
	}
	window := "concurrent"
	if r.Window > 0 {
		window = strconv.FormatInt(int64(r.Window/time.Second), 10)
	}
	// The scope's name keeps a per-install key from meeting a per-user
	// one; tool names have no \x1f.
	return ledger.Limit{
		Key:    tool + "\x1f" + window + "\x1f" + r.Scope + "\x1f" + subject,
		Max:    r.Max,
		Window: int64(r.Window / time.Second),
		Name:   r.Text,
	}
}
