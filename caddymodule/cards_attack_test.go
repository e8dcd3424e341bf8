package caddymodule

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/toolgate/toolgate/internal/apitest"
)

// The card attack on the admin API (see apitest.AttackRig, and the table
// "Attacks tried and faults injected" in docs/security.md) is replayed
// here, against a running gateway whose admin API is on, and nothing is
// sent; the others are replayed against internal/httpapi.

// startAttackGateway runs the rig's manifest in Caddy, with components api
// and files and the admin API on.
func startAttackGateway(t *testing.T) *apitest.AttackRig {
	rig := apitest.NewAttackRig(t)
	manifestPath := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(manifestPath, []byte(rig.Manifest()), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := dataDir(t)
	tc := caddytest.NewTester(t)
	initServer(tc, testGlobals(dir)+fmt.Sprintf(`http://127.0.0.1:9080 {
	bind 127.0.0.1
	handle_path /toolgate/* {
		toolgate {
			manifest %s
			component api %s {
				env API_KEY %s
			}
			component files %s {
				env API_KEY %s
			}
			identity {
				issuer https://tools.test
			}
			ledger bolt %s/ledger.db
			upstream_timeout 2s
		}
	}
}
`, manifestPath, rig.API.URL, apitest.SecretOfAPI, rig.Files.URL, apitest.SecretOfFiles, dir))
	rig.Client = client(tc)
	return rig
}

// (a) A url target answers a card whose button reads the admin API.
func TestCardAttackAdminAPI(t *testing.T) {
	rig := startAttackGateway(t)
	// The admin API is up and holds the secrets: what the attack was after.
	resp, err := rig.Client.HTTP.Get(apitest.AdminConfig)
	if err != nil {
		t.Fatalf("the admin API is not reachable, so this test proves nothing: %v", err)
	}
	cfg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(cfg, []byte(apitest.SecretOfAPI)) {
		t.Fatalf("the admin API's config holds no secret, so this test proves nothing: %s", cfg)
	}

	const notApp = "only app components may answer action-required cards"
	rig.Refused(t, "ext_card", "admin", "atk_admin", notApp)
	rig.Refused(t, "ext_card", "standin", "atk_standin", notApp)
	// A result mapping does not turn a card into a result, or let it through.
	rig.Refused(t, "ext_card_mapped", "admin", "atk_admin_mapped", notApp)
	rig.Refused(t, "ext_card_mapped", "standin", "atk_standin_mapped", notApp)
	// Nor may the app's own component point a button at the admin API.
	rig.Refused(t, "api_card", "admin", "atk_admin_app", `not a "url" target`)
	rig.Refused(t, "api_card", "standin", "atk_standin_app", `not a "url" target`)

	if n := len(rig.Admin.Requests()); n != 0 {
		t.Errorf("the admin API stand-in was sent %d requests", n)
	}
}
