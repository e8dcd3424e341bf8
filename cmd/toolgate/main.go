// Command toolgate is Caddy with its standard modules and the toolgate
// handler.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/toolgate/toolgate/caddymodule"
)

func main() {
	caddycmd.Main()
}
