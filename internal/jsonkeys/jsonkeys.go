// Package jsonkeys checks the JSON shape that a type promises its users:
// the snake_case names its fields marshal to. It exists for tests: a type
// printed by a `--json` flag or sent in an HTTP body gets a test that lists
// its keys, so a renamed, added or removed field fails that test instead of
// silently changing what scripts read.
//
// It imports no package of callscribe.
package jsonkeys

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// Check fails t unless every exported field of the struct v has an explicit
// snake_case json tag, and a value of v's type with every field set
// marshals to exactly the keys want (in any order).
func Check(t testing.TB, v any, want ...string) {
	t.Helper()
	typ := reflect.TypeOf(v)
	if typ == nil || typ.Kind() != reflect.Struct {
		t.Fatalf("jsonkeys.Check: %T is not a struct", v)
	}
	for f := range typ.Fields() {
		if !f.IsExported() {
			continue
		}
		tag, ok := f.Tag.Lookup("json")
		name, _, _ := strings.Cut(tag, ",")
		switch {
		case !ok:
			t.Errorf("%s.%s has no json tag: its JSON name would follow the Go name", typ, f.Name)
		case name == "-":
		case !snakeCase.MatchString(name):
			t.Errorf("%s.%s: json name %q is not snake_case", typ, f.Name, name)
		}
	}
	got, err := Keys(v)
	if err != nil {
		t.Fatalf("jsonkeys.Check(%s): %v", typ, err)
	}
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("%s marshals to keys\n  %s\nwant\n  %s\n(a changed name breaks every script that reads it: update docs/json.md too)",
			typ, strings.Join(got, " "), strings.Join(want, " "))
	}
}

// Keys returns the sorted top-level JSON keys of a value of v's type with
// every exported field set to a non-zero value.
func Keys(v any) ([]string, error) {
	p := reflect.New(reflect.TypeOf(v))
	fill(p.Elem())
	b, err := json.Marshal(p.Interface())
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s does not marshal to a JSON object: %w", p.Elem().Type(), err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, nil
}

var timeType = reflect.TypeFor[time.Time]()

// fill sets v, and everything it holds, to a non-zero value.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem())
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0))
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			fill(v.Index(i))
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Interface:
		if s := reflect.ValueOf("x"); s.Type().AssignableTo(v.Type()) {
			v.Set(s)
		}
	case reflect.Struct:
		if v.Type() == timeType {
			v.Set(reflect.ValueOf(time.Date(2026, 11, 29, 17, 4, 5, 0, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				fill(f)
			}
		}
	}
}
