package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/callscribe/callscribe/internal/strictjson"
)

// requestError is a client mistake, named by field.
type requestError struct{ field, msg string }

func (e *requestError) Error() string { return e.field + " " + e.msg }

func fieldError(field, msg string) error { return &requestError{field: field, msg: msg} }

func writeInvalid(w http.ResponseWriter, err error) {
	var extra map[string]any
	var re *requestError
	if errors.As(err, &re) {
		extra = map[string]any{"field": re.field}
	}
	writeError(w, http.StatusBadRequest, "invalid_request", err.Error(), extra)
}

// decode reads r's JSON body into v strictly (internal/strictjson): the
// media type exactly application/json, names matched case-sensitively,
// duplicate and unknown names, invalid UTF-8 and trailing data refused,
// and no body over the limit; on failure it has written the answer,
// naming the key and its path.
func (h *httpAPI) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if p := strictjson.MediaTypeProblem(r.Header.Get("Content-Type")); p != "" {
		writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", p+": Content-Type must be application/json", nil)
		return false
	}
	err := strictjson.Decode(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes), v)
	if err == nil {
		return true
	}
	var tooBig *http.MaxBytesError
	var bad *strictjson.Error
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body over %d bytes", tooBig.Limit), nil)
	case errors.As(err, &bad):
		var extra map[string]any
		msg := bad.Error()
		switch bad.Kind {
		case strictjson.Syntax, strictjson.Trailing, strictjson.Empty:
			// The body as a whole; the message says where.
			msg = "bad JSON: " + strings.TrimPrefix(msg, "bad JSON: ")
		default:
			extra = map[string]any{"field": bad.Field()}
		}
		writeError(w, http.StatusBadRequest, "invalid_request", msg, extra)
	default:
		writeError(w, http.StatusBadRequest, "invalid_request", "reading the body: "+err.Error(), nil)
	}
	return false
}

func writeError(w http.ResponseWriter, status int, typ, msg string, extra map[string]any) {
	body := map[string]any{}
	for k, v := range extra {
		body[k] = v
	}
	body["type"], body["message"] = typ, msg
	writeJSON(w, status, map[string]any{"error": body})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
