package quota

import (
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in     string
		max    int
		window time.Duration
		scope  string
		err    string
	}{
		{in: "20/1h per user", max: 20, window: time.Hour, scope: PerUser},
		{in: "1000/1d per install", max: 1000, window: 24 * time.Hour, scope: PerInstall},
		{in: "5 concurrent per user", max: 5, scope: PerUser},
		{in: "20/h per user", max: 20, window: time.Hour, scope: PerUser},
		{in: "3/90s per install", max: 3, window: 90 * time.Second, scope: PerInstall},
		{in: "1/30d per user", max: 1, window: 30 * 24 * time.Hour, scope: PerUser},
		{in: "1000000/m per user", max: 1000000, window: time.Minute, scope: PerUser},
		{in: "1/31d per user", err: "at most 30d"},
		{in: "1/721h per user", err: "at most 30d"},
		{in: "0/1h per user", err: "from 1 to"},
		{in: "1000001/1h per user", err: "from 1 to"},
		{in: "-1/1h per user", err: "from 1 to"},
		{in: "+1/1h per user", err: "from 1 to"},
		{in: "01/1h per user", err: "from 1 to"},
		{in: "20/0h per user", err: "positive whole number"},
		{in: "20/01h per user", err: "positive whole number"},
		{in: "20/1w per user", err: "unit is s, m, h or d"},
		{in: "20/ per user", err: "window is missing"},
		{in: "20/1h per tenant", err: "scope is user or install"},
		{in: "20/1h for user", err: "want per"},
		{in: "20 per user", err: "want"},
		{in: "20/1h  per user", err: "want"},
		{in: " 20/1h per user", err: "want"},
		{in: "5 concurrent per", err: "want"},
		{in: "5/1h concurrent per user", err: "from 1 to"},
		{in: "5 parallel per user", err: "want"},
		{in: "99999999999999999999/1h per user", err: "from 1 to"},
		{in: "1/99999999999999999999h per user", err: "positive whole number"},
		{in: "", err: "want"},
	} {
		r, err := Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) = %+v, %v; want error with %q", tc.in, r, err, tc.err)
			}
			continue
		}
		if err != nil || r.Max != tc.max || r.Window != tc.window || r.Scope != tc.scope || r.Text != tc.in {
			t.Errorf("Parse(%q) = %+v, %v; want %d %v %s", tc.in, r, err, tc.max, tc.window, tc.scope)
		}
	}
}

func TestParseAllRefusesTwins(t *testing.T) {
	if _, err := ParseAll([]string{"20/1h per user", "20/60m per user"}); err == nil || !strings.Contains(err.Error(), "count the same calls") {
		t.Errorf("same window twice: %v", err)
	}
	if _, err := ParseAll([]string{"2 concurrent per user", "3 concurrent per user"}); err == nil {
		t.Error("two concurrent rules for one scope were taken")
	}
	rules, err := ParseAll([]string{"20/1h per user", "20/1h per install", "5 concurrent per user", "100/1d per user"})
	if err != nil || len(rules) != 4 {
		t.Fatalf("ParseAll = %v, %v", rules, err)
	}
}

// TestLimitKeys: the subjects a rule counts apart are apart, two
// installations' users with one id included.
func TestLimitKeys(t *testing.T) {
	user, _ := Parse("20/1h per user")
	install, _ := Parse("20/1h per install")
	conc, _ := Parse("2 concurrent per user")
	keys := map[string]string{}
	for name, k := range map[string]string{
		"u1 in a":          user.Limit("pay", "u1", "a").Key,
		"u1 in b":          user.Limit("pay", "u1", "b").Key,
		"u2 in a":          user.Limit("pay", "u2", "a").Key,
		"install a":        install.Limit("pay", "u1", "a").Key,
		"u1 in a, all":     user.Limit(AllTools, "u1", "a").Key,
		"u1 in a, mail":    user.Limit("mail", "u1", "a").Key,
		"u1 in a, running": conc.Limit("pay", "u1", "a").Key,
	} {
		if other, ok := keys[k]; ok {
			t.Errorf("%s and %s share the key %q", name, other, k)
		}
		keys[k] = name
	}
	if l := user.Limit("pay", "u1", "a"); l.Max != 20 || l.Window != 3600 || l.Name != "20/1h per user" {
		t.Errorf("limit = %+v", l)
	}
	if l := conc.Limit("pay", "u1", "a"); !l.Concurrent() || l.Max != 2 {
		t.Errorf("concurrent limit = %+v", l)
	}
	// Whose rule refused is read from the limit, not its text, which a
	// tool's rule and one over all tools may share.
	if OverAllTools(user.Limit("pay", "u1", "a")) || !OverAllTools(user.Limit(AllTools, "u1", "a")) {
		t.Error("OverAllTools cannot tell a tool's rule from one over all tools")
	}
	if a, b := install.Limit("pay", "u1", "a").Key, install.Limit("pay", "u2", "a").Key; a != b {
		t.Errorf("per install: two users of one installation count apart: %q, %q", a, b)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"20/1h per user", "5 concurrent per install", "1/d per user", "0/0 per x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Parse(s)
		if err != nil {
			return
		}
		if r.Max < 1 || r.Max > MaxCount || r.Window < 0 || r.Window > MaxWindow || (r.Scope != PerUser && r.Scope != PerInstall) {
			t.Fatalf("Parse(%q) = %+v", s, r)
		}
		if r.Window%time.Second != 0 {
			t.Fatalf("Parse(%q): window %v is not whole seconds", s, r.Window)
		}
	})
}
