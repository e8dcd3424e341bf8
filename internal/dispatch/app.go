package dispatch

import "fmt"

// TypeApp is the wire name of an app target: a route of one of the app's
// own components, sent the user's identity.
const TypeApp = "app"

type appKind struct{}

func (appKind) Name() string       { return TypeApp }
func (appKind) NeedsUser() bool    { return true }
func (appKind) InPage() bool       { return false }
func (appKind) AnswersCards() bool { return true }
func (appKind) ShowsUI() bool      { return true }

func (appKind) compile(t *Target, env Env) error {
	s := t.Spec
	if err := t.compileHTTP(env.Components); err != nil {
		return err
	}
	if t.Component == nil {
		return fmt.Errorf("app target: component is required")
	}
	if s.URL != "" {
		return fmt.Errorf("app target: url is for url targets; use path")
	}
	if s.Operation != nil {
		if err := t.compileOperation(s.Path, t.Component.BaseURL.String()); err != nil {
			return err
		}
		if t.Component.Socket != "" {
			t.socket = t.Component.Socket
		}
	} else if err := t.compileAppPath(); err != nil {
		return err
	}
	if err := t.compileParams(gatewayHeaders); err != nil {
		return err
	}
	if s.Result != "" {
		return fmt.Errorf("app target: result mappings are for url targets; an app component answers the channels itself")
	}
	return nil
}

func (appKind) Execute(t *Target, x Executor) Outcome {
	return x.Send(t, Sending{Identity: true})
}

func (appKind) Describe(t *Target) string { return t.Spec.Component + " " + t.Spec.Path }
