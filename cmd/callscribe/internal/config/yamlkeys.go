package config

import (
	"errors"
	"reflect"
	"regexp"
	"strings"

	"github.com/callscribe/callscribe/internal/fielderr"
)

// yamlKey is the configuration file's key of the field at Go path path
// (fielderr's: field names, map keys as fielderr.Key writes them) in a
// value of type t, found through the yaml tags: Pipeline.Tenants["acme"].
// MinConfidence is pipeline.tenants.acme.min_confidence. A field inlined
// into its parent (yaml:",inline", an embedded struct) adds no key. An
// element the tags do not name stays as it is.
func yamlKey(t reflect.Type, path []string) string {
	keys := make([]string, 0, len(path))
	for _, p := range path {
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if k, ok := fielderr.IsKey(p); ok {
			keys = append(keys, k)
			if t != nil && t.Kind() == reflect.Map {
				t = t.Elem()
			} else {
				t = nil
			}
			continue
		}
		if t == nil || t.Kind() != reflect.Struct {
			keys, t = append(keys, p), nil
			continue
		}
		f, ok := t.FieldByName(p)
		if !ok {
			keys, t = append(keys, p), nil
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			name = p
		}
		keys, t = append(keys, name), f.Type
	}
	return strings.Join(keys, ".")
}

// Named is err, an error of a package whose configuration is the field at
// Go path at of Config, with its field errors naming their keys in the
// file: jobs.New's error about Tenants["acme"] (at "Pipeline") names
// pipeline.tenants.acme. Other errors are kept as they are.
func Named(err error, at ...string) error {
	if err == nil {
		return nil
	}
	var out []error
	for _, e := range fielderr.Flatten(err) {
		var fe *fielderr.Error
		if errors.As(e, &fe) {
			e = &fielderr.Error{Path: append(append([]string(nil), at...), fe.Path...), Msg: fe.Msg, Refs: fe.Refs}
		}
		out = append(out, e)
	}
	return inYAML(reflect.TypeFor[Config](), errors.Join(out...))
}

// inYAML rewrites every field error in err (a *fielderr.Error whose path
// is a Go path in a value of type t) to name the configuration file's key,
// and the fields its message refers to by theirs:
// "retry_after.max_backoff: 1s must be >= retry_after.base_backoff (2s)".
// Other errors are kept as they are.
func inYAML(t reflect.Type, err error) error {
	var out []error
	for _, e := range fielderr.Flatten(err) {
		var fe *fielderr.Error
		if !errors.As(e, &fe) {
			out = append(out, e)
			continue
		}
		msg := fe.Msg
		parent := fe.Path[:max(len(fe.Path)-1, 0)]
		for _, ref := range fe.Refs {
			key := yamlKey(t, append(append([]string(nil), parent...), ref))
			msg = regexp.MustCompile(`\b`+regexp.QuoteMeta(ref)+`\b`).ReplaceAllLiteralString(msg, key)
		}
		out = append(out, errors.New(yamlKey(t, fe.Path)+": "+msg))
	}
	return errors.Join(out...)
}
