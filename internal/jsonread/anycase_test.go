package jsonread

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/jsonread/legacyjson"
)

type anyCaseButton struct {
	ID    string `json:"id"`
	Label string
}

type anyCaseCard struct {
	Title    string               `json:"title"`
	N        float64              `json:"n,omitempty"`
	On       bool                 `json:"on"`
	Assignee *struct{ ID string } `json:"assignee"`
	Elements []anyCaseButton      `json:"elements"`
	Tags     map[string]string    `json:"tags"`
	Fixed    [2]int               `json:"fixed"`
	Any      any                  `json:"any"`
	Embedded
}

type Embedded struct {
	Inner string `json:"inner_name"`
}

// anyCaseInputs are read by UnmarshalAnyCase and by encoding/json, which
// must agree.
var anyCaseInputs = []string{
	`{"title":"t","n":1.5,"on":true,"assignee":{"ID":"a"},"elements":[{"id":"x","Label":"X"}],"tags":{"k":"v"},"fixed":[1,2],"any":{"a":[1,"b",null]},"inner_name":"i"}`,
	// Names in any case, but '_' and '-' count.
	`{"TITLE":"t","Elements":[{"ID":"x","label":"X"}],"ASSIGNEE":{"id":"a"},"Inner_Name":"i"}`,
	`{"ti_tle":"t","title-":"u","innername":"i","inner-name":"j"}`,
	`{"tıtle":"t","ſ":1,"K":"k"}`,
	// The last of repeated names wins, whatever its case.
	`{"title":"a","Title":"b","TITLE":"c"}`,
	`{"tags":{"k":"a","k":"b"},"tags":{"j":"c"}}`,
	`{"assignee":{"ID":"a"},"assignee":{"ID":"b"}}`,
	`{"any":{"a":{"x":1}},"any":{"a":{"y":2}}}`,
	`{"any":{"a":{"x":1},"a":{"y":2}}}`,
	// A null leaves a string, number, bool, struct or array as it was.
	`{"title":"t","title":null,"n":2,"n":null,"on":true,"on":null,"fixed":[1,2],"fixed":null,"inner_name":"i","inner_name":null}`,
	`{"assignee":{"ID":"a"},"assignee":null,"elements":[{"id":"x"}],"elements":null,"tags":{"a":"b"},"tags":null,"any":1,"any":null}`,
	`{"elements":[{"id":"x","Label":null}]}`,
	// Invalid UTF-8 becomes U+FFFD, in names too.
	"{\"title\":\"\xff\",\"tags\":{\"\xfe\":\"\\ud800\"}}",
	// Wrong types, unknown names, other values, bad JSON.
	`{"title":1}`, `{"elements":{}}`, `{"fixed":[1,2,3]}`, `{"x":1,"y":{"title":2}}`,
	`null`, `[]`, `{"title":"t"} {}`, `{"title":`, ``,
}

func TestUnmarshalAnyCase(t *testing.T) {
	for _, in := range anyCaseInputs {
		var got, want anyCaseCard
		err := UnmarshalAnyCase([]byte(in), &got)
		errV1 := legacyjson.Unmarshal([]byte(in), &want)
		if (err != nil) != (errV1 != nil) || errV1 == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("UnmarshalAnyCase(%q) = %+v, %v; encoding/json %+v, %v", in, got, err, want, errV1)
		}
	}
}

func TestUnmarshalAnyCaseStrict(t *testing.T) {
	for _, in := range anyCaseInputs {
		var got, want anyCaseCard
		err := UnmarshalAnyCase([]byte(in), &got, json.RejectUnknownMembers(true))
		dec := legacyjson.NewDecoder(bytes.NewReader([]byte(in)))
		dec.DisallowUnknownFields()
		errV1 := dec.Decode(&want)
		if errV1 == nil && dec.More() {
			errV1 = fmt.Errorf("data after the value")
		}
		if (err != nil) != (errV1 != nil) || errV1 == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("UnmarshalAnyCase(%q) strictly = %+v, %v; encoding/json %+v, %v", in, got, err, want, errV1)
		}
	}
}

func TestUnmarshalAnyCaseUnknownField(t *testing.T) {
	var c anyCaseCard
	err := UnmarshalAnyCase([]byte(`{"title":"t","assignee":{"ID":"a","x_y":1}}`), &c, json.RejectUnknownMembers(true))
	var u *UnknownFieldError
	if !errors.As(err, &u) || u.Name != "x_y" || err.Error() != `json: unknown field "x_y"` || !errors.Is(err, json.ErrUnknownName) {
		t.Errorf("error %v (%#v), want an UnknownFieldError for x_y", err, err)
	}
}

func TestUnmarshalAnyCaseAny(t *testing.T) {
	for _, in := range append(anyCaseInputs, `1e400`, `-0`, `[1,{"a":{"b":1},"a":{"c":2}}]`, `"\u003c"`) {
		var got, want any
		err := UnmarshalAnyCase([]byte(in), &got)
		errV1 := legacyjson.Unmarshal([]byte(in), &want)
		if (err != nil) != (errV1 != nil) || errV1 == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("UnmarshalAnyCase(%q) into any = %#v, %v; encoding/json %#v, %v", in, got, err, want, errV1)
		}
	}
	if err := UnmarshalAnyCase([]byte(`{}`), anyCaseCard{}); err == nil {
		t.Error("UnmarshalAnyCase into a struct value did not fail")
	}
}
