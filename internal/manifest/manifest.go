// Package manifest holds tool declarations: it loads them from JSON manifests
// or inline config, checks every rule of the manifest format and its targets
// (docs/configuration.md, "The manifest format" and "Targets") at load, and compiles
// their input schemas and targets once.
package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/mapping"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/quota"
	"github.com/toolgate/toolgate/internal/refs"
)

// Tool is one tool as declared.
type Tool struct {
	// Name is how the model calls the tool: ^[a-zA-Z0-9_-]{1,64}$, unique.
	Name string `json:"name"`
	// DisplayName is a short human label. Default: the name.
	DisplayName string `json:"displayName,omitempty"`
	// Description tells the model what the tool does and when to call it.
	Description string `json:"description"`
	// InputSchema is a JSON Schema (2020-12) whose top level is an object.
	InputSchema jsontext.Value `json:"input_schema"`
	// Target is where a call goes.
	Target dispatch.Spec `json:"target"`
	// Annotations are hints for MCP clients.
	Annotations *Annotations `json:"annotations,omitzero"`
	// Allow is a policy expression (expr-lang) over {claims, user,
	// install, tool, context, input}; unset, every caller may call.
	Allow string `json:"allow,omitempty"`
	// UI says whether an MCP client that declares the MCP Apps extension
	// shows the tool's answers (markdown, embeds, cards) in the gateway's
	// view. Only an app target may show one. Default: true for app
	// targets, false for others.
	UI *bool `json:"ui,omitempty"`

	// OutputSchema is the JSON Schema (2020-12, "type": "object") of the
	// structured content the tool's answers carry, which MCP clients are
	// told: only a target whose answers carry one has it (an mcp target,
	// or an operation's whose output is declared).
	OutputSchema jsontext.Value `json:"output_schema,omitempty"`
	// Meta is an upstream MCP server's tool's _meta, passed on as it
	// listed it; no manifest sets it.
	Meta map[string]any `json:"-"`

	// Approval, when set, makes the gateway ask a person before a call is
	// sent (docs/governance.md).
	Approval *Approval `json:"approval,omitzero"`
	// Limits are the tool's quotas ("20/1h per user"), counted in calls.
	Limits []string `json:"limits,omitempty"`
}

// Approval is an approval rule: when When holds (always, when empty), a
// call waits on the gateway's own card until a person approves it.
type Approval struct {
	// When is an expression in allow's language; empty: always.
	When string `json:"when,omitempty"`
	// Title and Description are the card's.
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
	// Timeout is how long the question stays open ("24h", "90m", "2d");
	// default DefaultApprovalTimeout.
	Timeout string `json:"timeout,omitempty"`
	// Assignee is an expression yielding the device (computerId) that must
	// decide; empty, or an empty result: any of the caller's.
	Assignee string `json:"assignee,omitempty"`
}

// DefaultApprovalTimeout is how long an approval stays open by default.
const DefaultApprovalTimeout = 24 * time.Hour

// MaxApprovalTimeout bounds an approval's timeout.
const MaxApprovalTimeout = 30 * 24 * time.Hour

// CompiledApproval is an approval rule ready to evaluate.
type CompiledApproval struct {
	Approval
	// When is nil for a rule that always holds.
	When     *policy.Allow
	Assignee *policy.Allow
	Timeout  time.Duration
}

// ShowsUI reports whether the tool's answers show in the MCP Apps view.
func (t *Tool) ShowsUI() bool {
	k, ok := dispatch.KindOf(t.Target.Type)
	return ok && k.ShowsUI() && (t.UI == nil || *t.UI)
}

// CardAnswerTool is the tool the gateway adds for MCP Apps clients, whose
// view answers action-required cards through it; no declared tool may
// take its name.
const CardAnswerTool = "toolgate_card_answer"

// Annotations are the optional MCP tool hints.
type Annotations struct {
	ReadOnlyHint    *bool `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool `json:"openWorldHint,omitempty"`
}

// File is the shape of a manifest file.
type File struct {
	Tools []Tool `json:"tools"`
}

// Source is a group of tools and where they were declared, for errors.
type Source struct {
	// Name is the manifest's path, or a name for inline config.
	Name  string
	Tools []Tool
}

// MaxSize is the largest manifest read, a JSON file or a compiler's
// output: 8 MiB holds thousands of tools, and a file that is not a manifest
// (a log, a disk image named by mistake) is refused before it is held in
// memory.
const MaxSize = 8 << 20

// ReadFile reads a manifest: a JSON file, or a TypeScript one (.ts, .mts)
// compiled by the kit's compiler (see FindCompiler). Unknown fields are
// errors: a misspelled field must not silently drop a rule. Errors name
// path as given, never a file the compiler wrote.
func ReadFile(path string) (Source, error) {
	var data []byte
	var err error
	if IsTypeScript(path) {
		data, err = compileTypeScript(path)
	} else {
		data, err = readLimited(path)
	}
	if err != nil {
		return Source{}, fmt.Errorf("manifest %s: %w", path, err)
	}
	f, err := Parse(data)
	if err != nil {
		return Source{}, fmt.Errorf("manifest %s: %w", path, err)
	}
	return Source{Name: "manifest " + path, Tools: f.Tools}, nil
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxSize {
		return nil, fmt.Errorf("larger than %d bytes", MaxSize)
	}
	return data, nil
}

// Parse decodes a manifest document strictly: unknown members refused,
// names matched as encoding/json matched them (jsonread.UnmarshalAnyCase).
func Parse(data []byte) (File, error) {
	var f File
	if err := jsonread.UnmarshalAnyCase(data, &f, json.RejectUnknownMembers(true)); err != nil {
		if errors.Is(err, jsonread.ErrTrailing) {
			return File{}, errors.New("invalid JSON: trailing data after the document")
		}
		if errors.Is(err, json.ErrUnknownName) {
			if named := unknownMember(data); named != nil {
				return File{}, fmt.Errorf("invalid JSON: %w", named)
			}
		}
		return File{}, fmt.Errorf("invalid JSON: %w", err)
	}
	if f.Tools == nil {
		return File{}, errors.New(`no "tools" array`)
	}
	return f, nil
}

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Compiled is a checked tool, ready to call.
type Compiled struct {
	Tool
	// Source is where the tool was declared.
	Source string
	Schema *jsonschema.Schema
	Target *dispatch.Target
	// Policy is the compiled Allow expression, if any.
	Policy *policy.Allow
	// Approval is the compiled approval rule, if any.
	Approval *CompiledApproval
	// Limits are the tool's own quotas, read.
	Limits []quota.Rule
}

// Set is the tools a gateway serves.
type Set struct {
	byName map[string]*Compiled
	list   []*Compiled
}

// Load reads the manifest files and compiles their tools and the inline
// ones (named "inline tools" in errors) against the components.
func Load(files []string, inline []Tool, components map[string]*dispatch.Component) (*Set, error) {
	return LoadIn(files, inline, dispatch.Env{Components: components})
}

// LoadIn is Load against env's components and upstream MCP servers, with
// the tools of extra sources too (an OpenAPI document's).
func LoadIn(files []string, inline []Tool, env dispatch.Env, extra ...Source) (*Set, error) {
	var sources []Source
	for _, path := range files {
		src, err := ReadFile(path)
		if err != nil {
			return nil, err
		}
		sources = append(sources, src)
	}
	sources = append(sources, extra...)
	if len(inline) > 0 {
		sources = append(sources, Source{Name: "inline tools", Tools: inline})
	}
	return CompileIn(sources, env)
}

// Compile checks and compiles every tool of every source. The first error
// names the source and the tool.
func Compile(sources []Source, components map[string]*dispatch.Component) (*Set, error) {
	return CompileIn(sources, dispatch.Env{Components: components})
}

// CompileIn is Compile against env: its components and its upstream MCP
// servers (env.Results is always mapping.Compile).
func CompileIn(sources []Source, env dispatch.Env) (*Set, error) {
	set := &Set{byName: map[string]*Compiled{}}
	for _, src := range sources {
		for i, t := range src.Tools {
			c, err := compileTool(t, env)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", src.Name, toolLabel(t, i), err)
			}
			if prev, dup := set.byName[t.Name]; dup {
				return nil, fmt.Errorf("%s: tool %q: duplicate name, already declared in %s", src.Name, t.Name, prev.Source)
			}
			c.Source = src.Name
			set.byName[t.Name] = c
			set.list = append(set.list, c)
		}
	}
	sort.SliceStable(set.list, func(i, j int) bool { return set.list[i].Name < set.list[j].Name })
	return set, nil
}

func toolLabel(t Tool, i int) string {
	if t.Name == "" {
		return fmt.Sprintf("tools[%d]", i)
	}
	return fmt.Sprintf("tool %q", t.Name)
}

// CompileTool checks one tool against the declared components.
func CompileTool(t Tool, components map[string]*dispatch.Component) (*Compiled, error) {
	return compileTool(t, dispatch.Env{Components: components})
}

// CompileToolIn is CompileTool against env's components and upstream MCP
// servers.
func CompileToolIn(t Tool, env dispatch.Env) (*Compiled, error) { return compileTool(t, env) }

func compileTool(t Tool, env dispatch.Env) (*Compiled, error) {
	if !nameRE.MatchString(t.Name) {
		return nil, fmt.Errorf("name %q must match %s", t.Name, nameRE)
	}
	if t.Name == CardAnswerTool {
		return nil, fmt.Errorf("name %q is reserved: the gateway serves a tool of that name to MCP Apps clients", t.Name)
	}
	if strings.TrimSpace(t.Description) == "" {
		return nil, errors.New("description is required")
	}
	if t.DisplayName == "" {
		t.DisplayName = t.Name
	}
	doc, sch, err := compileSchema(t.Name, t.InputSchema)
	if err != nil {
		return nil, err
	}
	env.Results = mapping.Compile
	target, err := dispatch.Compile(t.Target, env)
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	if err := checkInputRefs(doc, target.Refs()); err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	// Only an app's own component answers cards and pages of its own; a
	// view promised for another target would show nothing it can answer.
	if t.UI != nil && *t.UI && !target.Kind().ShowsUI() {
		return nil, fmt.Errorf(`ui: only an app target shows in the MCP Apps view (this one is %q)`, t.Target.Type)
	}
	if len(t.OutputSchema) > 0 {
		if err := checkOutput(t, target); err != nil {
			return nil, err
		}
	}
	c := &Compiled{Tool: t, Schema: sch, Target: target}
	if t.Allow != "" {
		if c.Policy, err = policy.Compile(t.Allow); err != nil {
			return nil, err
		}
	}
	if t.Approval != nil {
		if c.Approval, err = compileApproval(*t.Approval, target); err != nil {
			return nil, err
		}
	}
	if c.Limits, err = quota.ParseAll(t.Limits); err != nil {
		return nil, err
	}
	return c, nil
}

// CheckApproval checks an approval rule as a tool's would be checked,
// but for its target: for a rule given to many tools at once.
func CheckApproval(a Approval) error {
	_, err := compileApproval(a, nil)
	return err
}

// compileApproval checks and compiles an approval rule.
func compileApproval(a Approval, target *dispatch.Target) (*CompiledApproval, error) {
	if target != nil && target.Kind().InPage() {
		return nil, errors.New("approval: a client tool runs in the user's own page, so there is no call to hold for approval")
	}
	if strings.TrimSpace(a.Title) == "" {
		return nil, errors.New("approval: a title is required (the card's)")
	}
	c := &CompiledApproval{Approval: a, Timeout: DefaultApprovalTimeout}
	var err error
	if a.When != "" {
		if c.When, err = policy.CompileWhen(a.When); err != nil {
			return nil, err
		}
	}
	if a.Assignee != "" {
		if c.Assignee, err = policy.CompileString(a.Assignee, "approval assignee"); err != nil {
			return nil, err
		}
	}
	if a.Timeout != "" {
		if c.Timeout, err = ParseTimeout(a.Timeout); err != nil {
			return nil, fmt.Errorf("approval timeout: %v", err)
		}
	}
	return c, nil
}

// ParseTimeout reads an approval's timeout: a Go duration ("24h",
// "90m", "1h30m") or whole days ("2d"), from a second to
// MaxApprovalTimeout.
func ParseTimeout(s string) (time.Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 1 || days[0] == '+' {
			return 0, fmt.Errorf("%q: whole days (2d) or a duration (24h, 90m)", s)
		}
		if n > int(MaxApprovalTimeout/(24*time.Hour)) {
			return 0, fmt.Errorf("%q: at most 30d", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q: whole days (2d) or a duration (24h, 90m)", s)
		}
	}
	switch {
	case d < time.Second:
		return 0, fmt.Errorf("%q: at least 1s", s)
	case d > MaxApprovalTimeout:
		return 0, fmt.Errorf("%q: at most 30d", s)
	}
	return d, nil
}

// checkOutput checks an output schema: an object schema that compiles,
// on a target whose answers carry structured content.
func checkOutput(t Tool, target *dispatch.Target) error {
	op := t.Target.Operation
	if target.Kind().Name() != dispatch.TypeMCP && (op == nil || op.Output == "") {
		return errors.New(`output_schema: only a tool whose answers carry structured content has one (an mcp target, or an operation's with "output")`)
	}
	if _, _, err := compileSchemaAt(t.Name, t.OutputSchema, "output_schema"); err != nil {
		return err
	}
	return nil
}

func compileSchema(name string, raw jsontext.Value) (map[string]any, *jsonschema.Schema, error) {
	return compileSchemaAt(name, raw, "input_schema")
}

// compileSchemaAt compiles one of a tool's schemas, what (input_schema,
// output_schema) naming it in errors.
func compileSchemaAt(name string, raw jsontext.Value, what string) (map[string]any, *jsonschema.Schema, error) {
	if len(raw) == 0 {
		return nil, nil, errors.New(what + " is required")
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: invalid JSON: %w", what, err)
	}
	doc, ok := v.(map[string]any)
	if !ok || doc["type"] != "object" {
		return nil, nil, fmt.Errorf(`%s: the top level must be "type": "object"`, what)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// Zod's exports say "format": "uri", "email", …; a model reads them as
	// rules, so they are checked, not just annotations.
	c.AssertFormat()
	// No loader: a schema must be self-contained, never fetched or read
	// from disk at load.
	c.UseLoader(jsonschema.SchemeURLLoader{})
	loc := "toolgate:///tools/" + name + "/" + what + ".json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	sch, err := c.Compile(loc)
	if err != nil {
		return nil, nil, fmt.Errorf("%s does not compile: %w", what, err)
	}
	return doc, sch, nil
}

// checkInputRefs refuses references that can never resolve: an input
// property the schema forbids.
func checkInputRefs(schema map[string]any, rs []refs.Ref) error {
	props, _ := schema["properties"].(map[string]any)
	patterns, _ := schema["patternProperties"].(map[string]any)
	closed := schema["additionalProperties"] == false
	for _, r := range rs {
		if r.Root != refs.RootInput || len(r.Path) == 0 || !closed {
			continue
		}
		if _, ok := props[r.Path[0]]; ok || matchesAny(patterns, r.Path[0]) {
			continue
		}
		return fmt.Errorf("%s can never resolve: input_schema allows no property %q", r, r.Path[0])
	}
	return nil
}

// matchesAny reports whether a patternProperties pattern may admit name.
// A pattern Go's regexp cannot read counts as a match: the check must
// never refuse a reference that can resolve.
func matchesAny(patterns map[string]any, name string) bool {
	for p := range patterns {
		re, err := regexp.Compile(p)
		if err != nil || re.MatchString(name) {
			return true
		}
	}
	return false
}

// Lookup returns the named tool.
func (s *Set) Lookup(name string) (*Compiled, bool) {
	c, ok := s.byName[name]
	return c, ok
}

// List returns the tools sorted by name.
func (s *Set) List() []*Compiled { return s.list }

// ValidateInput checks input against the tool's schema. The error lists
// every problem as "path: reason", one per line, for the model to fix.
func (c *Compiled) ValidateInput(input any) error {
	err := c.Schema.Validate(input)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	var lines []string
	collect(ve.BasicOutput(), &lines)
	if len(lines) == 0 {
		lines = append(lines, "(root): "+ve.Error())
	}
	return &InputError{Problems: lines}
}

func collect(u *jsonschema.OutputUnit, lines *[]string) {
	if u.Error != nil && len(u.Errors) == 0 {
		loc := u.InstanceLocation
		if loc == "" {
			loc = "(root)"
		}
		*lines = append(*lines, loc+": "+u.Error.String())
	}
	for i := range u.Errors {
		collect(&u.Errors[i], lines)
	}
}

// InputError lists what is wrong with an input.
type InputError struct {
	Problems []string
}

func (e *InputError) Error() string {
	return "invalid input:\n- " + strings.Join(e.Problems, "\n- ")
}
