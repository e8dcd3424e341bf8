// Package toolgate is the module's root, for xcaddy: a build that plugs in
// this package plugs in the toolgate Caddy module (http.handlers.toolgate).
// From a checkout (see the README's Install section):
//
//	xcaddy build v2.11.9 --with github.com/toolgate/toolgate@v0.1.0=./
package toolgate

import _ "github.com/toolgate/toolgate/caddymodule"
