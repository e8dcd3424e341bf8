package apitest

import "fmt"

// The input schemas of the test tool set.
const (
	TestSchema  = `{"type":"object","properties":{"id":{"type":"string"},"n":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}},"note":{"type":"string"}},"required":["id"],"additionalProperties":false}`
	EmptySchema = `{"type":"object","properties":{},"additionalProperties":false}`
)

// Manifest is the tools.json of the test tool set: from_manifest, an app
// tool on component api, and ext_text, a url tool on upstream that sends
// the component's env API_KEY.
func Manifest(upstream string) string {
	return fmt.Sprintf(`{"tools":[{"name":"from_manifest","displayName":"From manifest","description":"A manifest tool.","input_schema":{"type":"object"},"target":{"type":"app","component":"api","method":"GET","path":"/text"}},
{"name":"ext_text","description":"A url tool.","input_schema":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]},"target":{"type":"url","method":"GET","url":"%s/text","query":{"q":"${input.q}"},"headers":{"X-Key":"${env.API_KEY}"},"component":"api"}}]}`, upstream)
}
