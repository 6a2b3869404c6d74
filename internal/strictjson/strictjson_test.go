package strictjson_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/internal/strictjson"
)

type request struct {
	TenantID string     `json:"tenant_id,omitempty"`
	CallID   string     `json:"call_id"`
	At       *time.Time `json:"at,omitempty"`
	Items    []struct {
		CallID string `json:"call_id"`
	} `json:"items"`
}

func TestDecodeNamesTheKeyAndPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body  string
		kind  strictjson.Kind
		field string
		says  string
	}{
		{`{"TENANT_ID":"rival","call_id":"c"}`, strictjson.Unknown, "TENANT_ID", `unknown key "TENANT_ID" (keys are case-sensitive: "tenant_id") at /TENANT_ID`},
		{`{"tenant_id":"acme","tenant_id":"rival"}`, strictjson.Duplicate, "tenant_id", `duplicate key "tenant_id" at /tenant_id`},
		{`{"items":[{"call_id":"a"},{"call_id":"b","call_id":"c"}]}`, strictjson.Duplicate, "items[1].call_id", `duplicate key "call_id" at /items/1/call_id`},
		{`{"items":[{"Call_Id":"a"}]}`, strictjson.Unknown, "items[0].Call_Id", `(keys are case-sensitive: "call_id")`},
		{`{"priority":1}`, strictjson.Unknown, "priority", `unknown key "priority" at /priority`},
		{`{"call_id":1}`, strictjson.Type, "call_id", "must be a string, got a number at /call_id"},
		{`{"at":"tomorrow"}`, strictjson.Type, "at", "RFC 3339"},
		{`{"items":{}}`, strictjson.Type, "items", "must be an array, got an object"},
		{`{"call_id":"c"} {"call_id":"d"}`, strictjson.Trailing, "", "data after the JSON value"},
		{`{"call_id":"c"`, strictjson.Syntax, "", "bad JSON"},
		{"{\"call_id\":\"\xff\"}", strictjson.Syntax, "call_id", "invalid UTF-8"},
		{"  \n", strictjson.Empty, "", "empty"},
		{`[]`, strictjson.Type, "", "must be an object, got an array"},
	} {
		var v request
		err := strictjson.Decode(strings.NewReader(tc.body), &v)
		var se *strictjson.Error
		if !errors.As(err, &se) || se.Kind != tc.kind || se.Field() != tc.field || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v (%+v), want %s at %q saying %q", tc.body, err, se, tc.kind, tc.field, tc.says)
		}
	}
	var v request
	if err := strictjson.Decode(strings.NewReader(`{"tenant_id":"acme","call_id":"c","at":"2024-05-01T15:04:05Z","items":[{"call_id":"x"}]}`), &v); err != nil ||
		v.TenantID != "acme" || v.CallID != "c" || v.At == nil || len(v.Items) != 1 {
		t.Fatalf("a good body: %+v, %v", v, err)
	}
}

func TestMediaTypeProblem(t *testing.T) {
	t.Parallel()
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON;charset=UTF-8"} {
		if p := strictjson.MediaTypeProblem(ct); p != "" {
			t.Errorf("%q refused: %s", ct, p)
		}
	}
	for _, ct := range []string{"", "application/jsonp", "application/json-seq", "text/json", "application/json-patch+json",
		"application/x-www-form-urlencoded", "application/json; charset=latin1", "application/json;;", "application/jsonx; charset=utf-8"} {
		if p := strictjson.MediaTypeProblem(ct); p == "" {
			t.Errorf("%q accepted", ct)
		}
	}
}
