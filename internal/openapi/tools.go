package openapi

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/result"
	"github.com/toolgate/toolgate/internal/verify"
)

// Target says where the tools of a document send their calls: app targets
// on a component, or url targets on a server.
type Target struct {
	// Component names the component app targets run on.
	Component string
	// Server is the base URL url targets are sent to: https, or http to a
	// loopback host.
	Server string
	// Headers are sent with every call of a url target, resolved at load.
	Headers map[string]string
	// Connection sends every call of a url target the calling user's
	// token of the named connection, as Authorization: Bearer.
	Connection string
}

// Check checks the target.
func (t Target) Check() error {
	switch {
	case (t.Component == "") == (t.Server == ""):
		return fmt.Errorf("give a component (app targets) or a server (url targets)")
	case t.Component != "" && len(t.Headers) > 0:
		return fmt.Errorf("header lines are for a server: a component's calls carry the identity token")
	case t.Component != "" && t.Connection != "":
		return fmt.Errorf("a connection is for a server: a component's calls carry the identity token")
	case t.Connection != "" && hasHeader(t.Headers, "Authorization"):
		return fmt.Errorf("header Authorization: the connection sends one already")
	case t.Server != "":
		u, err := url.Parse(t.Server)
		if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" ||
			!(u.Scheme == "https" || u.Scheme == "http" && verify.IsLoopbackHost(u.Hostname())) {
			return fmt.Errorf("server %q must be an https URL (or http to a loopback host) with no user, query or fragment", t.Server)
		}
	}
	return nil
}

// ManifestTool is the tool the operation makes, sending to t.
func (o Operation) ManifestTool(t Target) manifest.Tool {
	desc := strings.TrimSpace(strings.Join([]string{o.Summary, o.Description}, "\n\n"))
	if desc == "" {
		desc = o.Method + " " + o.Path
	}
	op := &dispatch.Operation{}
	for _, in := range o.Inputs {
		op.Params = append(op.Params, dispatch.OperationParam{
			Name: in.Name, In: in.In, Style: in.Style, Explode: in.Explode, AllowReserved: in.AllowReserved, Group: in.Group,
		})
	}
	if o.Body != nil {
		op.Body = &dispatch.OperationBody{MediaType: o.Body.MediaType, Property: o.Body.Property}
	}
	switch {
	case o.OutputSchema == nil:
	case o.OutputWrapped:
		op.Output = result.OutputWrapped
	default:
		op.Output = result.OutputObject
	}
	spec := dispatch.Spec{Method: o.Method, Operation: op}
	if t.Component != "" {
		spec.Type, spec.Component, spec.Path = dispatch.TypeApp, t.Component, o.Path
	} else {
		spec.Type, spec.URL = dispatch.TypeURL, strings.TrimSuffix(t.Server, "/")+o.Path
		if len(t.Headers) > 0 || t.Connection != "" {
			spec.Headers = map[string]string{}
			for k, v := range t.Headers {
				// A literal: a ${ in the resolved value is no reference.
				spec.Headers[k] = strings.ReplaceAll(v, "${", "$${")
			}
		}
		if t.Connection != "" {
			spec.Headers["Authorization"] = "Bearer ${connection." + t.Connection + "}"
		}
	}
	readOnly, idempotent := o.ReadOnly, o.Idempotent
	return manifest.Tool{
		Name: o.Tool, DisplayName: o.Summary, Description: desc,
		InputSchema: o.InputSchema, OutputSchema: o.OutputSchema, Target: spec,
		Annotations: &manifest.Annotations{ReadOnlyHint: &readOnly, IdempotentHint: &idempotent, DestructiveHint: o.Destructive},
	}
}

// hasHeader reports whether h names header name, in any case.
func hasHeader(h map[string]string, name string) bool {
	for k := range h {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}
