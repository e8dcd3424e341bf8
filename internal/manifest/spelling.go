package manifest

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/jsonread"
)

// respellings are the spellings other tool formats use for a member a
// manifest spells otherwise: MCP's and OpenAI's camel and snake case.
var respellings = map[string]string{
	"inputSchema":  "input_schema",
	"input-schema": "input_schema",
	"parameters":   "input_schema",
	"display_name": "displayName",
	"title":        "displayName",
}

// unknownMember names the tool and the member a strict decode refused as
// an unknown field, and the manifest's spelling when the member is
// another format's: "unknown field" alone says neither which of many
// tools nor what to write. It returns nil when it finds no such member
// (the refusal was elsewhere: the top level).
func unknownMember(data []byte) error {
	var doc struct {
		Tools []map[string]jsontext.Value `json:"tools"`
	}
	if jsonread.UnmarshalAnyCase(data, &doc) != nil {
		return nil
	}
	for i, t := range doc.Tools {
		var name string
		_ = json.Unmarshal(t["name"], &name, jsonread.Lenient)
		where := fmt.Sprintf("tool %q (tools[%d])", name, i)
		if k := unknownKey(t, reflect.TypeFor[Tool]()); k != "" {
			if right, ok := respellings[k]; ok {
				return fmt.Errorf("%s: unknown field %q: a manifest spells it %q", where, k, right)
			}
			return fmt.Errorf("%s: unknown field %q (known: %s)", where, k, strings.Join(jsonNames(reflect.TypeFor[Tool]()), ", "))
		}
		for _, nested := range []struct {
			member string
			typ    reflect.Type
		}{{"target", reflect.TypeFor[dispatch.Spec]()}, {"annotations", reflect.TypeFor[Annotations]()}} {
			var m map[string]jsontext.Value
			if json.Unmarshal(t[nested.member], &m, jsonread.Lenient) != nil {
				continue
			}
			if k := unknownKey(m, nested.typ); k != "" {
				return fmt.Errorf("%s: %s: unknown field %q (known: %s)", where, nested.member, k, strings.Join(jsonNames(nested.typ), ", "))
			}
		}
	}
	return nil
}

// unknownKey is the first key of m, in order, that typ has no member for.
func unknownKey(m map[string]jsontext.Value, typ reflect.Type) string {
	known := jsonNames(typ)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		// encoding/json matches member names without regard to case.
		if !slices.ContainsFunc(known, func(n string) bool { return strings.EqualFold(n, k) }) {
			return k
		}
	}
	return ""
}

// jsonNames are the JSON member names of a struct type.
func jsonNames(typ reflect.Type) []string {
	var names []string
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}
