package caddymodule

import (
	"context"
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/openapi"
)

// OpenAPI imports an OpenAPI 3.0 or 3.1 document's operations as tools,
// one per operation, each an ordinary tool: its input checked against the
// operation's parameters and body, sent with the identity token to a
// component, or to a server.
type OpenAPI struct {
	// File is the document: a path (YAML or JSON; its $refs may name
	// files beside it), or an https URL, read when the config loads.
	File string `json:"file"`

	// Component makes app targets on that component. Exclusive with
	// Server.
	Component string `json:"component,omitempty"`

	// Server makes url targets on that base URL: https, or http to a
	// loopback host.
	Server string `json:"server,omitempty"`

	// Operations are the operationIds to take. Default: every operation
	// with an operationId that is not deprecated.
	Operations []string `json:"operations,omitempty"`

	// Prefix goes before each tool's name.
	Prefix string `json:"prefix,omitempty"`

	// Headers are sent with every call of a server's tools; values may be
	// placeholders such as {env.API_KEY}, resolved at load.
	Headers map[string]string `json:"headers,omitempty"`

	// Connection sends every call of a server's tools the calling user's
	// token of the named connection as Authorization: Bearer
	// (connections.md).
	Connection string `json:"connection,omitempty"`

	// Approval and Limits are every tool's approval rule and quotas, as a
	// tool's own (each tool counted on its own).
	Approval *manifest.Approval `json:"approval,omitzero"`
	Limits   []string           `json:"limits,omitempty"`
}

// UnmarshalCaddyfile sets up the import from `openapi <file> {…}`.
func (o *OpenAPI) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // consume the directive's name
	if err := stringArg(&o.File)(d); err != nil {
		return err
	}
	return parseBlock(d, "openapi subdirective", map[string]option{
		"component":  stringArg(&o.Component),
		"server":     stringArg(&o.Server),
		"operations": listArg(&o.Operations),
		"prefix":     stringArg(&o.Prefix),
		"header":     pairArg(&o.Headers, ""),
		"connection": stringArg(&o.Connection),
		"approval":   approvalArg(&o.Approval, ""),
		"limit":      limitArg(&o.Limits, ""),
	})
}

// source reads the document and makes its tools, placeholders in the
// file, the server and the headers resolved. The operations it skips are
// logged, each with why.
func (o *OpenAPI) source(ctx context.Context, repl *caddy.Replacer, logger *zap.Logger) (manifest.Source, error) {
	name := "openapi " + o.File
	file, err := resolve(repl, name, o.File)
	if err != nil {
		return manifest.Source{}, err
	}
	to := openapi.Target{Component: o.Component, Connection: o.Connection}
	if to.Server, err = resolve(repl, name+": server", o.Server); err != nil {
		return manifest.Source{}, err
	}
	if to.Headers, err = resolveEach(repl, name+": header", o.Headers); err != nil {
		return manifest.Source{}, err
	}
	if err := to.Check(); err != nil {
		return manifest.Source{}, fmt.Errorf("%s: %v", name, err)
	}
	doc, err := openapi.Load(ctx, file)
	if err != nil {
		return manifest.Source{}, fmt.Errorf("%s: %v", name, err)
	}
	ops, skipped, err := openapi.Operations(doc, openapi.Options{Operations: o.Operations, Prefix: o.Prefix})
	if err != nil {
		return manifest.Source{}, fmt.Errorf("%s: %v", name, err)
	}
	for _, s := range skipped {
		logger.Warn("openapi operation skipped", zap.String("document", o.File), zap.String("operation", s.ID),
			zap.String("method", s.Method), zap.String("path", s.Path), zap.String("why", s.Why))
	}
	if err := checkGovernance(o.Approval, o.Limits); err != nil {
		return manifest.Source{}, fmt.Errorf("%s: %w", name, err)
	}
	src := manifest.Source{Name: name}
	for _, op := range ops {
		t := op.ManifestTool(to)
		t.Approval, t.Limits = o.Approval, o.Limits
		src.Tools = append(src.Tools, t)
	}
	return src, nil
}
