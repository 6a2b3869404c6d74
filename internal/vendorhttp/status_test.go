package vendorhttp

import (
	"net/http"
	"testing"
)

func TestStatusTableClassify(t *testing.T) {
	t.Parallel()
	rows := CommonRows()
	rows[http.StatusConflict] = Rule{Verdict: Refuse, Class: "conflict"}
	table := StatusTable{
		Rows:        rows,
		Redirect:    Rule{Verdict: Refuse, Class: "unexpected_redirect"},
		ClientError: Rule{Verdict: Retry, Class: ClassUnexpectedStatus},
		ServerError: Rule{Verdict: Retry, Class: ClassServerError},
		Other:       Rule{Verdict: Retry, Class: "other"},
	}
	retryAfter := http.Header{"Retry-After": {"5"}}
	emptyRetryAfter := http.Header{"Retry-After": {""}}
	tests := []struct {
		status  int
		header  http.Header
		verdict Verdict
		class   string
	}{
		{400, nil, Refuse, ClassInvalidRequest},
		{422, nil, Refuse, ClassInvalidRequest},
		{401, nil, Refuse, ClassUnauthorized},
		{403, nil, Refuse, ClassForbidden},
		{404, nil, Refuse, ClassNotFound},
		{408, nil, Retry, ClassTimeout},
		{409, nil, Refuse, "conflict"},
		{429, nil, Throttle, ClassRateLimited},
		{429, retryAfter, Throttle, ClassRateLimited},
		{503, nil, Retry, ClassUnavailable},
		{503, retryAfter, Throttle, ClassUnavailable},
		{503, emptyRetryAfter, Throttle, ClassUnavailable}, // present, however malformed
		{500, retryAfter, Retry, ClassServerError},         // Retry-After counts on 503 rows only
		{502, nil, Retry, ClassServerError},
		{599, nil, Retry, ClassServerError},
		{301, nil, Refuse, "unexpected_redirect"},
		{399, nil, Refuse, "unexpected_redirect"},
		{418, nil, Retry, ClassUnexpectedStatus},
		{499, nil, Retry, ClassUnexpectedStatus},
		{100, nil, Retry, "other"},
		{204, nil, Retry, "other"},
		{600, nil, Retry, "other"},
		{0, nil, Retry, "other"},
	}
	for _, tt := range tests {
		v, class := table.Classify(tt.status, tt.header)
		if v != tt.verdict || class != tt.class {
			t.Errorf("Classify(%d, %v) = %s %q, want %s %q", tt.status, tt.header, v, class, tt.verdict, tt.class)
		}
	}
}

func TestCommonRowsIsACopy(t *testing.T) {
	t.Parallel()
	a := CommonRows()
	a[http.StatusBadRequest] = Rule{Verdict: Retry, Class: "changed"}
	delete(a, http.StatusNotFound)
	b := CommonRows()
	if b[http.StatusBadRequest].Class != ClassInvalidRequest || b[http.StatusNotFound].Class != ClassNotFound {
		t.Errorf("CommonRows shares its map between callers: %v", b)
	}
}

func TestVerdictString(t *testing.T) {
	t.Parallel()
	for v, want := range map[Verdict]string{Retry: "retry", Throttle: "throttle", Refuse: "refuse", 0: "unknown"} {
		if got := v.String(); got != want {
			t.Errorf("Verdict(%d).String() = %q, want %q", int(v), got, want)
		}
	}
}
