package strictjson_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/callscribe/callscribe/internal/strictjson"
)

type inner struct {
	X string `json:"x"`
	Y bool   `json:"y_flag,omitempty"`
}

type target struct {
	A string  `json:"a"`
	B int     `json:"b_count"`
	C []inner `json:"items"`
	D *inner  `json:"d"`
}

var (
	targetNames = []string{"a", "b_count", "items", "d"}
	innerNames  = []string{"x", "y_flag"}
)

// doc builds one JSON text and says what Decode must make of it.
type doc struct {
	b strings.Builder
	// The first duplicate and the first unknown name in document order,
	// as JSON pointers; "" when there is none.
	dup, unknown string
}

// key draws a member name for an object with the given field names: the
// exact name mostly, else a name differing only in case, an unknown
// name, or a repeat of a name already used in this object. It returns
// the name as Decode reads it.
func (d *doc) key(t *rapid.T, names []string, used map[string]bool, path string) string {
	name := rapid.SampledFrom(names).Draw(t, "name")
	switch rapid.IntRange(0, 9).Draw(t, "keyKind") {
	case 0: // a case variant: another name
		i := rapid.IntRange(0, len(name)-1).Draw(t, "caseAt")
		up := strings.ToUpper(name[i : i+1])
		if up != name[i:i+1] {
			name = name[:i] + up + name[i+1:]
		}
	case 1:
		name = rapid.SampledFrom([]string{"zz", "tenant", "A_", "é"}).Draw(t, "unknownName")
	case 2:
		if len(used) > 0 {
			name = rapid.SampledFrom(slices.Sorted(maps.Keys(used))).Draw(t, "repeat")
		}
	}
	ptr := path + "/" + name
	if used[name] && d.dup == "" {
		d.dup = ptr
	}
	if !slices.Contains(names, name) && d.unknown == "" && !used[name] {
		d.unknown = ptr
	}
	used[name] = true
	// The same name, written plainly or as \u escapes.
	if rapid.Bool().Draw(t, "escape") {
		d.b.WriteByte('"')
		for _, r := range name {
			fmt.Fprintf(&d.b, `\u%04x`, r)
		}
		d.b.WriteByte('"')
	} else {
		enc, _ := json.Marshal(name)
		d.b.Write(enc)
	}
	return name
}

func (d *doc) space(t *rapid.T) {
	d.b.WriteString(rapid.SampledFrom([]string{"", " ", "\n\t", "\r\n  "}).Draw(t, "space"))
}

func (d *doc) value(t *rapid.T, v any) {
	enc, _ := json.Marshal(v)
	d.b.Write(enc)
}

func (d *doc) innerObject(t *rapid.T, path string) {
	d.b.WriteByte('{')
	used := map[string]bool{}
	n := rapid.IntRange(0, 3).Draw(t, "innerMembers")
	for i := range n {
		if i > 0 {
			d.b.WriteByte(',')
		}
		d.space(t)
		name := d.key(t, innerNames, used, path)
		d.b.WriteByte(':')
		d.space(t)
		if strings.EqualFold(name, "y_flag") {
			d.value(t, rapid.Bool().Draw(t, "y"))
		} else {
			d.value(t, rapid.String().Draw(t, "x"))
		}
	}
	d.b.WriteByte('}')
}

func (d *doc) targetObject(t *rapid.T) {
	d.b.WriteByte('{')
	used := map[string]bool{}
	n := rapid.IntRange(0, 6).Draw(t, "members")
	for i := range n {
		if i > 0 {
			d.b.WriteByte(',')
		}
		d.space(t)
		name := d.key(t, targetNames, used, "")
		d.b.WriteByte(':')
		d.space(t)
		switch strings.ToLower(name) {
		case "b_count":
			d.value(t, rapid.IntRange(-1000, 1000).Draw(t, "b"))
		case "items":
			d.b.WriteByte('[')
			for j := range rapid.IntRange(0, 3).Draw(t, "nItems") {
				if j > 0 {
					d.b.WriteByte(',')
				}
				d.innerObject(t, fmt.Sprintf("/%s/%d", name, j))
			}
			d.b.WriteByte(']')
		case "d":
			if rapid.Bool().Draw(t, "dNull") {
				d.b.WriteString("null")
			} else {
				d.innerObject(t, "/"+name)
			}
		default:
			d.value(t, rapid.String().Draw(t, "a"))
		}
	}
	d.b.WriteByte('}')
}

// Decode accepts a body exactly when every name is a field's json name,
// written in its case, and no object repeats a name; it then decodes what
// encoding/json decodes. Otherwise it names the first duplicate (checked
// over the whole body first), then trailing data, then the first unknown
// name, by its JSON pointer.
func TestDecodeRapid(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		var d doc
		d.space(t)
		d.targetObject(t)
		d.space(t)
		trailing := rapid.SampledFrom([]string{"", "", "", " {}", "x", ` "a"`}).Draw(t, "trailing")
		d.b.WriteString(trailing)
		body := d.b.String()

		var got target
		err := strictjson.Decode(strings.NewReader(body), &got)
		var se *strictjson.Error
		if err != nil && !errors.As(err, &se) {
			t.Fatalf("%s: error %T %v, want an *Error", body, err, err)
		}
		switch {
		case d.dup != "":
			if se == nil || se.Kind != strictjson.Duplicate || se.Pointer != d.dup || !strings.Contains(err.Error(), d.dup) {
				t.Fatalf("%s: %v, want a duplicate at %s", body, err, d.dup)
			}
		case trailing != "":
			if se == nil || se.Kind != strictjson.Trailing {
				t.Fatalf("%s: %v, want trailing data refused", body, err)
			}
		case d.unknown != "":
			if se == nil || se.Kind != strictjson.Unknown || se.Pointer != d.unknown || !strings.Contains(err.Error(), d.unknown) {
				t.Fatalf("%s: %v, want an unknown key at %s", body, err, d.unknown)
			}
		default:
			if err != nil {
				t.Fatalf("%s: %v, want it accepted", body, err)
			}
			var want target
			if err := json.Unmarshal([]byte(body), &want); err != nil {
				t.Fatalf("%s: encoding/json: %v", body, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: decoded %+v, encoding/json decodes %+v", body, got, want)
			}
		}
	})
}
