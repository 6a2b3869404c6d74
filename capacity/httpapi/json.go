package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
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

// decode reads r's JSON body into v, rejecting unknown fields, trailing
// data and bodies over the limit; on failure it has written the answer.
func (h *httpAPI) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type must be application/json", nil)
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	if err == nil && dec.Decode(&struct{}{}) != io.EOF {
		err = errors.New("body must hold one JSON object")
	}
	if err == nil {
		return true
	}
	var tooBig *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body over %d bytes", tooBig.Limit), nil)
	case errors.Is(err, io.EOF):
		writeError(w, http.StatusBadRequest, "invalid_request", "request body is empty: want a JSON object", nil)
	case errors.As(err, &typeErr):
		writeError(w, http.StatusBadRequest, "invalid_request",
			fmt.Sprintf("%s must be a JSON %s, got %s", typeErr.Field, typeErr.Type, typeErr.Value), map[string]any{"field": typeErr.Field})
	default:
		writeError(w, http.StatusBadRequest, "invalid_request", "bad JSON: "+strings.TrimPrefix(err.Error(), "json: "), nil)
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
