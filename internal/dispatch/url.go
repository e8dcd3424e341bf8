package dispatch

import "fmt"

// TypeURL is the wire name of a url target: an external HTTP endpoint,
// someone else's, sent no identity.
const TypeURL = "url"

type urlKind struct{}

func (urlKind) Name() string       { return TypeURL }
func (urlKind) NeedsUser() bool    { return false }
func (urlKind) InPage() bool       { return false }
func (urlKind) AnswersCards() bool { return false }
func (urlKind) ShowsUI() bool      { return false }

func (urlKind) compile(t *Target, env Env) error {
	s := t.Spec
	if err := t.compileHTTP(env.Components); err != nil {
		return err
	}
	if s.Path != "" {
		return fmt.Errorf("url target: path is for app targets; put it in url")
	}
	if s.Operation != nil {
		if err := t.compileOperation(s.URL, ""); err != nil {
			return err
		}
	} else if err := t.compileURL(); err != nil {
		return err
	}
	if err := t.compileParams(nil); err != nil {
		return err
	}
	if s.Result != "" {
		if env.Results == nil {
			return fmt.Errorf("url target: a result expression cannot be compiled here")
		}
		var err error
		if t.Mapping, err = env.Results(s.Result); err != nil {
			return fmt.Errorf("url target: %w", err)
		}
	}
	return nil
}

func (urlKind) Execute(t *Target, x Executor) Outcome {
	return x.Send(t, Sending{CheckEmbeds: true})
}

func (urlKind) Describe(t *Target) string { return t.Spec.URL }
