package caddymodule

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/openapi"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "openapi",
		Usage: "[--component <name> | --server <url>] [--operations <id,...>] [--prefix <prefix>] [--json] <file or https URL>",
		Short: "Prints the tools an OpenAPI document makes",
		Long: `
Reads an OpenAPI 3.0 or 3.1 document as the openapi subdirective of the
toolgate directive does, and prints the tools it would make: each tool's
name, operation, inputs (where each is sent) and whether its answer has a
schema, then the operations it skipped and why. Review them before
serving the document.

With --json it prints them as a manifest ({"tools": [...]}), for a
component (--component) or a server (--server), which can be edited and
served with the manifest subdirective instead.`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.Flags().String("component", "", "make app targets on this component")
			cmd.Flags().String("server", "", "make url targets on this base URL")
			cmd.Flags().String("operations", "", "the operationIds to take, comma-separated (default: every one not deprecated)")
			cmd.Flags().String("prefix", "", "put before each tool's name")
			cmd.Flags().Bool("json", false, "print a manifest")
			cmd.Args = cobra.ExactArgs(1)
			cmd.RunE = func(cmd *cobra.Command, args []string) error {
				return caddycmd.WrapCommandFuncForCobra(func(fl caddycmd.Flags) (int, error) {
					return printOpenAPI(fl, args[0])
				})(cmd, args)
			}
		},
	})
}

// printOpenAPI is the openapi command.
func printOpenAPI(fl caddycmd.Flags, file string) (int, error) {
	opts := openapi.Options{Prefix: fl.String("prefix")}
	if ids := fl.String("operations"); ids != "" {
		opts.Operations = strings.Split(ids, ",")
	}
	doc, err := openapi.Load(context.Background(), file)
	if err != nil {
		return 1, fmt.Errorf("%s: %v", file, err)
	}
	ops, skipped, err := openapi.Operations(doc, opts)
	if err != nil {
		return 1, fmt.Errorf("%s: %v", file, err)
	}
	to := openapi.Target{Component: fl.String("component"), Server: fl.String("server")}
	if fl.Bool("json") {
		if err := to.Check(); err != nil {
			return 1, err
		}
		f := manifest.File{}
		for _, op := range ops {
			f.Tools = append(f.Tools, op.ManifestTool(to))
		}
		out, err := json.Marshal(f, jsontext.WithIndent("  "), json.Deterministic(true))
		if err != nil {
			return 1, err
		}
		fmt.Println(string(out))
		return 0, nil
	}
	for _, op := range ops {
		fmt.Printf("%s  %s %s\n", op.Tool, op.Method, op.Path)
		if op.Summary != "" {
			fmt.Printf("  %s\n", op.Summary)
		}
		for _, in := range op.Inputs {
			where := in.Property
			if in.Group != "" {
				where = in.Group + "." + in.Property
			}
			req := ""
			if in.Required {
				req = ", required"
			}
			fmt.Printf("  input %-24s → %s %s%s\n", where, in.In, in.Name, req)
		}
		if op.Body != nil {
			req := ""
			if op.Body.Required {
				req = ", required"
			}
			fmt.Printf("  input %-24s → body (%s%s)\n", op.Body.Property, op.Body.MediaType, req)
		}
		if op.OutputSchema != nil {
			fmt.Println("  answer: structured, with its schema")
		}
	}
	sort.Slice(skipped, func(i, j int) bool { return skipped[i].Path+skipped[i].Method < skipped[j].Path+skipped[j].Method })
	for _, s := range skipped {
		fmt.Fprintf(os.Stdout, "skipped %s %s (%s): %s\n", s.Method, s.Path, s.ID, s.Why)
	}
	return 0, nil
}
