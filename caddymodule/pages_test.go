package caddymodule

import (
	"fmt"
	"testing"

	"github.com/toolgate/toolgate/internal/apitest"
)

func pagesConfig(t *testing.T, dataDir string) string {
	return testGlobals(dataDir) + fmt.Sprintf(`http://127.0.0.1:9080 {
	bind 127.0.0.1
	handle_path /toolgate/* {
		toolgate {
			pages {
				secret %[2]s
				issuer https://app.test
				audience toolgate-pages
				origins %[3]s
			}
			client_tool_timeout 2s
			ledger bolt %[1]s/ledger.db
			tool where {
				description "Where the video is."
				input_schema `+"`"+`{"type":"object","properties":{"q":{"type":"string"}}}`+"`"+`
				target kazzle video_position
			}
		}
	}
	respond "next handler" 200
}
`, dataDir, apitest.PageSecret, apitest.PageOrigin)
}
