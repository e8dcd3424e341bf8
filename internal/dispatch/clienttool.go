package dispatch

import "fmt"

// TypeClient is the wire name of a client tool target: a tool the user's
// page runs. The wire keeps the protocol's name for it, "kazzle"
// (docs/configuration.md, "Targets").
const TypeClient = "kazzle"

type clientKind struct{}

func (clientKind) Name() string       { return TypeClient }
func (clientKind) NeedsUser() bool    { return false }
func (clientKind) InPage() bool       { return true }
func (clientKind) AnswersCards() bool { return false }
func (clientKind) ShowsUI() bool      { return false }

func (clientKind) compile(t *Target, _ Env) error {
	s := t.Spec
	if s.Name == "" {
		return fmt.Errorf("kazzle target: name is required")
	}
	if s.Component != "" || s.Method != "" || s.Path != "" || s.URL != "" || s.Query != nil || s.Headers != nil || s.Body != nil || s.Result != "" || s.Server != "" || s.Tool != "" || s.Continue || s.Operation != nil {
		return fmt.Errorf("kazzle target: only name may be set")
	}
	return nil
}

func (clientKind) Execute(t *Target, x Executor) Outcome { return x.RunInPage(t) }

func (clientKind) Describe(t *Target) string { return "client tool " + t.Spec.Name }
