// Package mapping compiles a url target's result expression (expr-lang),
// once at load, into the result.Mapping that turns the target's answer into
// the channels (docs/configuration.md, "Targets"). It is the one place the
// answer path meets the expression language: package result runs a mapping
// and package dispatch compiles targets without depending on it, so a
// component kit that checks a card's targets pulls in neither.
package mapping

import (
	"fmt"

	"github.com/expr-lang/expr"

	"github.com/toolgate/toolgate/internal/result"
)

// Compile compiles the result expression src against result.Answer.
func Compile(src string) (*result.Mapping, error) {
	prog, err := expr.Compile(src, expr.Env(result.Answer{}))
	if err != nil {
		return nil, fmt.Errorf("result %q: %w", src, err)
	}
	return result.NewMapping(src, func(a result.Answer) (any, error) {
		return expr.Run(prog, a)
	}), nil
}
