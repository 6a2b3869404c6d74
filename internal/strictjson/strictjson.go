// Package strictjson reads the JSON request bodies of callscribe's HTTP
// APIs strictly, with github.com/go-json-experiment/json (the proposed
// encoding/json/v2): a body is exactly one JSON value; an object member's
// name must equal its field's json name byte for byte (no case folding:
// "TENANT_ID" is not "tenant_id"); a name that is no field's, or that
// appears twice in one object (anywhere in the body), is refused; strings
// must be valid UTF-8; nothing may follow the value. encoding/json, by
// contrast, matches names case-insensitively and lets the last duplicate
// win, so that a proxy or a validator that reads the first "tenant_id"
// and the server that reads "TENANT_ID" can disagree about one body.
//
// Every refusal is an *Error naming the JSON pointer of the offending
// value and, for a name, the name. MediaTypeProblem checks the request's
// Content-Type.
//
// It imports no package of callscribe.
package strictjson

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Kind is what is wrong with a body.
type Kind string

// The kinds of Error.
const (
	// Empty: the body holds no JSON value.
	Empty Kind = "empty"
	// Syntax: the body is not JSON (truncated, malformed, invalid UTF-8).
	Syntax Kind = "syntax"
	// Trailing: something follows the one JSON value.
	Trailing Kind = "trailing"
	// Duplicate: an object names the same member twice.
	Duplicate Kind = "duplicate_key"
	// Unknown: an object member's name is no field's (names are
	// case-sensitive).
	Unknown Kind = "unknown_key"
	// Type: a value is not of the field's JSON type (or not a time where
	// one is wanted).
	Type Kind = "type"
)

// Error is a body that Decode refused.
type Error struct {
	Kind Kind
	// Pointer is the RFC 6901 JSON pointer of the offending value or
	// member ("/items/3/call_id"); "" for the whole body.
	Pointer string
	// Key is the offending member's name for Duplicate and Unknown, as
	// sent; "" otherwise.
	Key string
	// Offset is the byte offset in the body near which the problem is.
	Offset int64
	// Detail says what is wrong, for people.
	Detail string
}

// Error names the problem, the key and where it is.
func (e *Error) Error() string {
	if e.Pointer == "" {
		return e.Detail
	}
	return e.Detail + " at " + e.Pointer
}

// Field is Pointer as a field path for an API's answer: object members
// joined by dots and array elements as [n] ("items[3].call_id"); "" for
// the whole body. A member whose name is all digits reads as an index:
// no request type of callscribe's has such names.
func (e *Error) Field() string {
	var b strings.Builder
	for tok := range jsontext.Pointer(e.Pointer).Tokens() {
		if _, err := strconv.ParseUint(tok, 10, 64); err == nil {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

// Decode reads all of r and decodes it into v (a pointer) strictly, as
// the package doc says. An error reading r is returned as it is (so that
// errors.As finds an *http.MaxBytesError); a refused body is an *Error.
// v is left partly filled when the body is refused.
func Decode(r io.Reader, v any) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	return Unmarshal(data, v)
}

// Unmarshal is Decode of a body already read.
func Unmarshal(data []byte, v any) error {
	if len(bytes.TrimLeft(data, " \t\r\n")) == 0 {
		return &Error{Kind: Empty, Detail: "the body is empty: want a JSON object"}
	}
	// First the syntax, duplicate names included, of the whole value.
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	if _, err := dec.ReadValue(); err != nil {
		return syntaxError(err)
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return &Error{Kind: Trailing, Offset: dec.InputOffset(), Detail: "data after the JSON value: send one JSON object"}
	}
	// Then its shape: exact names, no unknown ones, the fields' types.
	err := json.Unmarshal(data, v, json.RejectUnknownMembers(true))
	if err == nil {
		return nil
	}
	var se *json.SemanticError
	if !errors.As(err, &se) {
		return syntaxError(err)
	}
	ptr := string(se.JSONPointer)
	if errors.Is(se.Err, json.ErrUnknownName) {
		key := se.JSONPointer.LastToken()
		detail := fmt.Sprintf("unknown key %q", key)
		if want := foldMatch(reflect.TypeOf(v), se.JSONPointer, key); want != "" {
			detail += fmt.Sprintf(" (keys are case-sensitive: %q)", want)
		}
		return &Error{Kind: Unknown, Pointer: ptr, Key: key, Offset: se.ByteOffset, Detail: detail}
	}
	detail := "wrong type"
	if se.GoType != nil {
		detail = "must be " + jsonKindOf(se.GoType)
	}
	if se.JSONKind != 0 {
		detail += ", got " + kindName(se.JSONKind)
	}
	if se.Err != nil && se.GoType != nil && deref(se.GoType) == timeType {
		detail = "must be an RFC 3339 time (2024-05-01T15:04:05Z)"
	}
	return &Error{Kind: Type, Pointer: ptr, Offset: se.ByteOffset, Detail: detail}
}

// syntaxError turns the decoder's error into an *Error.
func syntaxError(err error) error {
	var sy *jsontext.SyntacticError
	if !errors.As(err, &sy) {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return &Error{Kind: Syntax, Detail: "bad JSON: the body ends before its value does"}
		}
		return &Error{Kind: Syntax, Detail: "bad JSON: " + err.Error()}
	}
	ptr := string(sy.JSONPointer)
	if errors.Is(err, jsontext.ErrDuplicateName) {
		key := sy.JSONPointer.LastToken()
		return &Error{Kind: Duplicate, Pointer: ptr, Key: key, Offset: sy.ByteOffset,
			Detail: fmt.Sprintf("duplicate key %q", key)}
	}
	msg := "bad JSON"
	if sy.Err != nil {
		msg += ": " + sy.Err.Error()
	}
	return &Error{Kind: Syntax, Pointer: ptr, Offset: sy.ByteOffset, Detail: fmt.Sprintf("%s (near byte %d)", msg, sy.ByteOffset)}
}

var timeType = reflect.TypeFor[time.Time]()

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// jsonKindOf names the JSON type a Go type decodes from.
func jsonKindOf(t reflect.Type) string {
	t = deref(t)
	if t == timeType {
		return "an RFC 3339 time string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "a " + t.String()
}

func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 'f', 't':
		return "a boolean"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return k.String()
}

// foldMatch returns the json name of the struct field, at ptr's parent
// within type t, that key matches but for case; "" when there is none.
func foldMatch(t reflect.Type, ptr jsontext.Pointer, key string) string {
	if t == nil {
		return ""
	}
	t = deref(t)
	for tok := range ptr.Parent().Tokens() {
		switch t.Kind() {
		case reflect.Slice, reflect.Array, reflect.Map:
			t = deref(t.Elem())
		case reflect.Struct:
			f, ok := fieldNamed(t, func(name string) bool { return name == tok })
			if !ok {
				return ""
			}
			t = deref(f.Type)
		default:
			return ""
		}
	}
	if t.Kind() != reflect.Struct {
		return ""
	}
	var name string
	if _, ok := fieldNamed(t, func(n string) bool { name = n; return strings.EqualFold(n, key) }); ok {
		return name
	}
	return ""
}

// fieldNamed returns t's first field whose json name satisfies match.
func fieldNamed(t reflect.Type, match func(name string) bool) (reflect.StructField, bool) {
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if match(name) {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// MediaTypeProblem returns why a request's Content-Type header is not
// JSON, or "": its media type must be exactly application/json (in any
// case, as media types are); parameters are allowed, but a charset must
// be utf-8, JSON's only encoding. application/jsonp, application/json-seq,
// text/json, application/json-patch+json and the like are refused.
func MediaTypeProblem(contentType string) string {
	if contentType == "" {
		return "Content-Type is missing: send Content-Type: application/json"
	}
	mt, params, err := mime.ParseMediaType(contentType)
	switch {
	case err != nil:
		return "Content-Type does not parse: send Content-Type: application/json"
	case mt != "application/json":
		return fmt.Sprintf("Content-Type %q is not application/json", mt)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return fmt.Sprintf("charset %q: JSON is utf-8", cs)
	}
	return ""
}
