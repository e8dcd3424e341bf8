package jsonread

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// UnmarshalAnyCase reads the one JSON value in data into v as
// encoding/json's Unmarshal did, for the readers first written on it
// whose leniency callers may rely on (docs/architecture.md, JSON):
//   - a name matches a struct field's in any case, by strings.EqualFold,
//     where '_' and '-' count (json's own case-insensitive matching would
//     let "ti_tle" be "title");
//   - of repeated names the last wins, and a null leaves a string, number,
//     bool, struct or array field as it was;
//   - invalid UTF-8 becomes U+FFFD;
//   - into an any, numbers are float64 and an object repeated under one
//     name replaces the one before it (json merges the two);
//   - an array's extra elements are dropped.
//
// A repeated name whose value is an array of structs, or a map's object,
// is read as json reads it: the later value replaces the earlier one,
// where encoding/json merged them.
//
// A member a strict reader refuses is an *UnknownFieldError. opts are
// added to Lenient (json.RejectUnknownMembers for a strict
// reader). Names are matched by rewriting them to the field's own before
// json reads the value, so this costs a second pass: it is for cards,
// errors and configuration, not for the hot path.
func UnmarshalAnyCase(data []byte, v any, opts ...json.Options) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return errors.New("jsonread: UnmarshalAnyCase needs a non-nil pointer")
	}
	if p, ok := v.(*any); ok {
		return One(data, func(d *jsontext.Decoder) (err error) {
			*p, err = plainValue(d)
			return err
		}, Lenient)
	}
	var buf bytes.Buffer
	err := One(data, func(d *jsontext.Decoder) error {
		return copyFolded(d, jsontext.NewEncoder(&buf, Lenient), rv.Type().Elem())
	}, Lenient)
	if err != nil {
		return err
	}
	err = json.Unmarshal(buf.Bytes(), v, append([]json.Options{Lenient}, opts...)...)
	var se *json.SemanticError
	if errors.Is(err, json.ErrUnknownName) && errors.As(err, &se) {
		return &UnknownFieldError{Name: se.JSONPointer.LastToken(), err: err}
	}
	return err
}

// UnknownFieldError is a member that a strict reader (with
// json.RejectUnknownMembers) refused, in encoding/json's words. It wraps
// json.ErrUnknownName.
type UnknownFieldError struct {
	Name string
	err  error
}

func (e *UnknownFieldError) Error() string { return fmt.Sprintf("json: unknown field %q", e.Name) }

func (e *UnknownFieldError) Unwrap() error { return e.err }

var (
	valueType       = reflect.TypeFor[jsontext.Value]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	fromType        = reflect.TypeFor[json.UnmarshalerFrom]()
)

// copyFolded copies one value from d to e, rewriting the names of the
// objects that are read into a struct of type t (at any depth) to the
// field's own name.
func copyFolded(d *jsontext.Decoder, e *jsontext.Encoder, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch k := d.PeekKind(); {
	case ownReader(t):
	case k == '{' && (t.Kind() == reflect.Struct || t.Kind() == reflect.Map):
		return copyObject(d, e, t)
	case t.Kind() == reflect.Interface && t.NumMethod() == 0:
		// Read as encoding/json read it, so that json reads it the same.
		v, err := plainValue(d)
		if err != nil {
			return err
		}
		return json.MarshalEncode(e, v)
	case k == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		if err := copyToken(d, e); err != nil {
			return err
		}
		for n := 0; d.PeekKind() != ']'; n++ {
			if t.Kind() == reflect.Array && n >= t.Len() {
				// encoding/json dropped what an array has no room for.
				if err := d.SkipValue(); err != nil {
					return err
				}
				continue
			}
			if err := copyFolded(d, e, t.Elem()); err != nil {
				return err
			}
		}
		return copyToken(d, e)
	}
	v, err := d.ReadValue()
	if err != nil {
		return err
	}
	return e.WriteValue(v)
}

func copyObject(d *jsontext.Decoder, e *jsontext.Encoder, t reflect.Type) error {
	if err := copyToken(d, e); err != nil {
		return err
	}
	var fields []field
	if t.Kind() == reflect.Struct {
		fields = fieldsOf(t, nil)
	}
	for d.PeekKind() != '}' {
		tok, err := d.ReadToken()
		if err != nil {
			return err
		}
		name := tok.String()
		elem := t
		if fields == nil {
			elem = t.Elem()
		} else if f, ok := match(fields, name); ok {
			name, elem = f.name, f.typ
		} else {
			// An unknown name: json ignores it or refuses it.
			elem = valueType
		}
		if fields != nil && elem != valueType && d.PeekKind() == 'n' && keepsOnNull(elem) {
			// encoding/json left the field as it was.
			if err := d.SkipValue(); err != nil {
				return err
			}
			continue
		}
		if fields != nil && elem.Kind() == reflect.Interface {
			// A null first: json would merge an object into the value a
			// repeated name left, where encoding/json replaced it.
			if err := e.WriteToken(jsontext.String(name)); err != nil {
				return err
			}
			if err := e.WriteToken(jsontext.Null); err != nil {
				return err
			}
		}
		if err := e.WriteToken(jsontext.String(name)); err != nil {
			return err
		}
		if err := copyFolded(d, e, elem); err != nil {
			return err
		}
	}
	return copyToken(d, e)
}

// field is a struct field by its JSON name.
type field struct {
	name string
	typ  reflect.Type
}

// match finds the field named name, else the first one named so but for
// case, as encoding/json matched it.
func match(fields []field, name string) (field, bool) {
	for _, f := range fields {
		if f.name == name {
			return f, true
		}
	}
	for _, f := range fields {
		if strings.EqualFold(f.name, name) {
			return f, true
		}
	}
	return field{}, false
}

// ownReader reports whether values of t are read by their own method (or
// kept as text) rather than by their kind.
func ownReader(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t == valueType || p.Implements(unmarshalerType) || p.Implements(fromType)
}

func keepsOnNull(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer || ownReader(t) {
		return false
	}
	switch t.Kind() {
	case reflect.Map, reflect.Slice, reflect.Interface:
		return false
	}
	return true
}

// fieldsOf appends t's fields in order by their JSON names, those of
// embedded structs without a name of their own included.
func fieldsOf(t reflect.Type, fields []field) []field {
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				fields = fieldsOf(ft, fields)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields = append(fields, field{name, f.Type})
	}
	return fields
}

func copyToken(d *jsontext.Decoder, e *jsontext.Encoder) error {
	tok, err := d.ReadToken()
	if err != nil {
		return err
	}
	return e.WriteToken(tok)
}

// plainValue reads one value as encoding/json read it into an any:
// numbers as float64.
func plainValue(d *jsontext.Decoder) (any, error) { return value(d, floatNumber) }

func floatNumber(text string) (any, error) { return strconv.ParseFloat(text, 64) }
