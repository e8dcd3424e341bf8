package caddymodule

import (
	"errors"
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/toolgate/toolgate/internal/verify"
)

// resolve fills the Caddy placeholders of a secret, a password, a key
// path or an env value of the config ({env.NAME}, {file./run/secrets/x})
// once, at load. Taken literally, `secret {env.PAGE_SECRET}` would make the
// secret the text every reader of the Caddyfile sees; so a placeholder that
// is unknown or resolves to nothing is an error naming option. A literal
// brace is written \{. The value a placeholder gives is not scanned again.
func resolve(repl *caddy.Replacer, option, value string) (string, error) {
	out, err := repl.ReplaceOrErr(value, true, true)
	if err != nil {
		return "", fmt.Errorf("%s: %w (write \\{ for a literal brace)", option, err)
	}
	return out, nil
}

// resolveEnv resolves a component's env values, as resolve does.
func resolveEnv(repl *caddy.Replacer, component string, env map[string]string) (map[string]string, error) {
	return resolveEach(repl, fmt.Sprintf("component %q: env", component), env)
}

// resolveEach resolves each value of m, as resolve does; errors name the
// option as "<what> <key>". Nil stays nil.
func resolveEach(repl *caddy.Replacer, what string, m map[string]string) (map[string]string, error) {
	if m == nil {
		return nil, nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		r, err := resolve(repl, what+" "+k, v)
		if err != nil {
			return nil, err
		}
		out[k] = r
	}
	return out, nil
}

// examplePageSecret is the page secret Caddyfile.example falls back to
// when TOOLGATE_PAGE_SECRET is unset. It is public: whoever can reach the
// gateway can sign page tokens with it, so it is refused unless every
// listener is on this machine's loopback.
const examplePageSecret = "toolgate-example-page-secret-not-for-production"

// loopbackOnly checks that every listener of every server of the http app
// is on loopback (or a unix socket), so only this machine can reach the
// gateway. An app it cannot see, or an address it cannot read, fails.
func loopbackOnly(ctx caddy.Context, repl *caddy.Replacer) error {
	appIface, err := ctx.AppIfConfigured("http")
	if err != nil {
		return fmt.Errorf("cannot tell where the server listens: %w", err)
	}
	app, ok := appIface.(*caddyhttp.App)
	if !ok {
		return errors.New("cannot tell where the server listens")
	}
	return serversLoopbackOnly(app.Servers, repl)
}

func serversLoopbackOnly(servers map[string]*caddyhttp.Server, repl *caddy.Replacer) error {
	for name, srv := range servers {
		for _, l := range srv.Listen {
			addr, err := caddy.ParseNetworkAddress(repl.ReplaceAll(l, ""))
			if err != nil {
				return fmt.Errorf("server %s: listen address %q: %w", name, l, err)
			}
			if !addr.IsUnixNetwork() && (addr.IsFdNetwork() || !verify.IsLoopbackHost(addr.Host)) {
				return fmt.Errorf("server %s listens on %s, beyond loopback", name, l)
			}
		}
	}
	return nil
}
