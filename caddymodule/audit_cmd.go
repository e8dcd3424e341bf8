package caddymodule

import (
	"errors"
	"fmt"
	"io"
	"os"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/audit"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "audit",
		Usage: "verify <file>",
		Short: "Checks an audit trail",
		Long: `
Works on the audit trail the audit subdirective of the toolgate directive
writes (docs/audit.md).

"audit verify FILE" checks the trail's hash chain: each line must be an
entry whose prev is the SHA-256 of the line before it. It prints
"FILE: N lines, the chain holds" and exits 0, or names the first line
that does not hold ("FILE: line K: why") and exits 1. A changed line K
shows at line K+1, whose prev no longer matches.`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.AddCommand(&cobra.Command{
				Use:   "verify <file>",
				Short: "Checks an audit trail's hash chain and names the first broken line",
				Args:  cobra.ExactArgs(1),
				RunE: func(cmd *cobra.Command, args []string) error {
					// A broken chain is an answer, printed on stdout; the
					// exit status says it too, without a usage or log line.
					cmd.SilenceUsage, cmd.SilenceErrors = true, true
					err := verifyTrail(cmd.OutOrStdout(), args[0])
					if err != nil && !errors.Is(err, errBrokenTrail) {
						fmt.Fprintln(cmd.ErrOrStderr(), err)
					}
					return err
				},
			})
		},
	})
}

// errBrokenTrail: verifyTrail printed the first broken line.
var errBrokenTrail = errors.New("the chain does not hold")

// verifyTrail is `toolgate audit verify FILE`.
func verifyTrail(out io.Writer, file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	rep, err := audit.Verify(f)
	if be, ok := errors.AsType[*audit.BrokenError](err); ok {
		fmt.Fprintf(out, "%s: %v\n", file, be)
		return errBrokenTrail
	}
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	fmt.Fprintf(out, "%s: %d lines, the chain holds\n", file, rep.Lines)
	for _, n := range rep.Torn {
		fmt.Fprintf(out, "%s: line %d was torn (a write cut short) and recovered: its content is lost\n", file, n)
	}
	return nil
}
