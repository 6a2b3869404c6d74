// Package fielderr is the error a configuration's Validate returns for one
// field: the field's Go path (Tenants["t1"].MinConfidence) and what is
// wrong with it. Packages name their own Go fields; a program that reads
// the configuration from a file maps the path to its own key names (the
// binary does so through its yaml tags).
//
// It imports no package of callscribe.
package fielderr

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Error is a problem with one field.
type Error struct {
	// Path is the field's Go path, outermost first: field names, and map
	// keys as Key writes them (["t1"]).
	Path []string
	// Msg says what is wrong, without the path. It may name fields of the
	// struct holding the field (their Go names, listed in Refs).
	Msg string
	// Refs are the names of fields of the struct holding the field that
	// Msg names, so that a program can rename them with the field.
	Refs []string
}

// Errorf returns an error about field, Msg formatted from format and args.
func Errorf(field, format string, args ...any) *Error {
	return &Error{Path: []string{field}, Msg: fmt.Sprintf(format, args...)}
}

// Refer returns e with fields (Go names of fields beside e's) noted as
// named by its Msg.
func (e *Error) Refer(fields ...string) *Error {
	e.Refs = append(e.Refs, fields...)
	return e
}

// Error is the path and the message: Tenants["t1"].MinConfidence: 2 is
// not within 0..1.
func (e *Error) Error() string {
	if len(e.Path) == 0 {
		return e.Msg
	}
	return String(e.Path) + ": " + e.Msg
}

// String writes a Go path: fields joined by dots, map keys in brackets.
func String(path []string) string {
	var b strings.Builder
	for i, p := range path {
		if i > 0 && !strings.HasPrefix(p, "[") {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

// Key is map key k as a path element: ["k"].
func Key(k string) string { return "[" + strconv.Quote(k) + "]" }

// IsKey reports whether path element p is a map key, and which.
func IsKey(p string) (string, bool) {
	if !strings.HasPrefix(p, "[") || !strings.HasSuffix(p, "]") {
		return "", false
	}
	k, err := strconv.Unquote(p[1 : len(p)-1])
	return k, err == nil
}

// In returns err with every field error in it put under path (Config
// holding the field errors of its RetryAfter: In(err, "RetryAfter")). An
// error that is not a field error becomes one about path itself. nil
// stays nil.
func In(err error, path ...string) error {
	var out []error
	for _, e := range Flatten(err) {
		var fe *Error
		if errors.As(e, &fe) {
			out = append(out, &Error{Path: append(append([]string(nil), path...), fe.Path...), Msg: fe.Msg, Refs: fe.Refs})
			continue
		}
		out = append(out, &Error{Path: append([]string(nil), path...), Msg: e.Error()})
	}
	return errors.Join(out...)
}

// Flatten returns the errors err joins (errors.Join, at any depth), in
// order; err itself when it joins none; nothing for nil.
func Flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, Flatten(e)...)
		}
		return out
	}
	return []error{err}
}
