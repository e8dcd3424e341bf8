package result

import (
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/jsonread/legacyjson"
)

// decodeBodyV1 is how a mapping's body was decoded on encoding/json.
func decodeBodyV1(body []byte) any {
	var v any
	if legacyjson.Unmarshal(body, &v) != nil {
		return string(body)
	}
	return v
}

// A mapping sees a body as it did on encoding/json.
func TestDecodeBodyAsEncodingJSON(t *testing.T) {
	for _, body := range []string{
		`{"title":"t","id":42,"tags":["a","b"],"meta":{"n":1.5,"ok":true,"none":null}}`,
		`{"a":1,"a":"last"}`, `{"a":{"x":1},"a":{"y":2}}`, `{"a":[1,2],"a":[3]}`, `{"type":"x","type":"action_required"}`,
		"{\"\xff\":\"\xfe\",\"s\":\"\\ud800\\u00e9\"}", `{"A":1,"a":2}`,
		`12345678901234567890`, `1e400`, `-0`, `0.1e1`, `[1e-400]`,
		` "text" `, `null`, `true`, `[]`, `{}`,
		`not json`, `{"a":1} {}`, `{"a":`, `[1,]`, "\f1", ``, strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	} {
		if got, want := decodeBody([]byte(body)), decodeBodyV1([]byte(body)); !reflect.DeepEqual(got, want) {
			t.Errorf("decodeBody(%.60q) = %#v; on encoding/json %#v", body, got, want)
		}
	}
}
