package manifest

import (
	"fmt"
	"sort"

	"github.com/toolgate/toolgate/internal/dispatch"
)

// ClashError is a tool an upstream MCP server lists under a name another
// tool already takes.
type ClashError struct {
	Server, Tool string
	// Other is where the other tool was declared (Compiled.Source).
	Other string
}

func (e *ClashError) Error() string {
	return fmt.Sprintf("%s: tool %q: the name is taken by a tool of %s", ServerSource(e.Server), e.Tool, e.Other)
}

// ServerSource is how errors and Compiled.Source name the tools an
// upstream MCP server listed.
func ServerSource(server string) string { return "mcp server " + server }

// WithServer returns a Set with s's tools but for those server listed
// before, and tools, server's list now, compiled against env. A tool
// that does not compile, or whose name another tool already takes, is
// left out, and the errors say which and why: an upstream's list changes
// while the gateway runs, and the tools declared in the config stay
// whatever the upstream lists.
func (s *Set) WithServer(server string, tools []Tool, env dispatch.Env) (*Set, []error) {
	src := ServerSource(server)
	out := &Set{byName: make(map[string]*Compiled, len(s.list)+len(tools))}
	for _, c := range s.list {
		if c.Source == src {
			continue
		}
		out.byName[c.Name] = c
		out.list = append(out.list, c)
	}
	var errs []error
	for i, t := range tools {
		c, err := compileTool(t, env)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", src, toolLabel(t, i), err))
			continue
		}
		if prev, dup := out.byName[t.Name]; dup {
			errs = append(errs, &ClashError{Server: server, Tool: t.Name, Other: prev.Source})
			continue
		}
		c.Source = src
		out.byName[t.Name] = c
		out.list = append(out.list, c)
	}
	sort.SliceStable(out.list, func(i, j int) bool { return out.list[i].Name < out.list[j].Name })
	return out, errs
}
