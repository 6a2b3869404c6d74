package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/httpapi"
	"github.com/callscribe/callscribe/capacity/live"
	"github.com/callscribe/callscribe/internal/testredis"
)

// A live-call runtime in another language takes a transcriber slot over
// HTTP, refreshes it while the stream runs, and gives it back. The example
// needs the Redis at TEST_REDIS_URL, like the rest of the suite.
func ExampleNewHandler() {
	prefix := testredis.UniquePrefix("httpapi", "ExampleNewHandler")
	r, err := capacity.NewRedis(capacity.RedisConfig{URL: testredis.URL(), KeyPrefix: prefix})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	defer testredis.DeleteKeys(r.Client(), prefix)

	leases, err := capacity.New(r, capacity.Config{Limits: map[string]capacity.ProviderLimit{"deepgram/stt": {Limit: 2}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(httpapi.NewHandler(leases, nil, httpapi.Options{}))
	defer srv.Close()

	post := func(path, body string) (int, map[string]any) {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return 0, nil
		}
		defer resp.Body.Close()
		var m map[string]any
		if raw, _ := io.ReadAll(resp.Body); len(raw) > 0 {
			_ = json.Unmarshal(raw, &m)
		}
		return resp.StatusCode, m
	}

	code, grant := post("/v1/leases", `{"provider":"deepgram","kind":"stt","holder":"call-42","lane":"live"}`)
	fmt.Println("acquire:", code, "granted", grant["granted"], "in use", grant["in_use"], "of", grant["limit"])

	lease, _ := json.Marshal(grant["lease"]) // sent back exactly as received
	code, refresh := post("/v1/leases/refresh", `{"leases":[`+string(lease)+`]}`)
	fmt.Println("refresh:", code, "refreshed", len(refresh["refreshed"].([]any)), "lost", len(refresh["lost"].([]any)))

	code, _ = post("/v1/leases/release", `{"lease":`+string(lease)+`}`)
	fmt.Println("release:", code)
	// Output:
	// acquire: 200 granted true in use 1 of 2
	// refresh: 200 refreshed 1 lost 0
	// release: 204
}

// A voice runtime's call over HTTP, as docs/examples/live_call.py does it
// in Python: a call slot of the organisation and campaign, bound to the
// call; the call's transcriber; one voice slot per reply (the primary
// voice is full, so the reply overflows to the fallback); everything given
// back at hang-up; and the call's timeline. The example needs the Redis at
// TEST_REDIS_URL, like the rest of the suite.
func ExampleNewHandler_liveCall() {
	prefix := testredis.UniquePrefix("httpapi", "ExampleNewHandler_liveCall")
	r, err := capacity.NewRedis(capacity.RedisConfig{URL: testredis.URL(), KeyPrefix: prefix})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	defer testredis.DeleteKeys(r.Client(), prefix)

	leases, err := capacity.New(r, capacity.Config{Limits: map[string]capacity.ProviderLimit{
		"deepgram/stt": {Limit: 2}, "elevenlabs/tts": {Limit: 0}, "cartesia/tts": {Limit: 1}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	slots, err := capacity.NewSlots(r, capacity.SlotsConfig{Orgs: map[string]capacity.OrgSlots{"acme": {Limit: 10, Campaigns: map[string]int{"spring": 5}}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	timeline, err := live.NewTimeline(r, live.TimelineConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(httpapi.NewHandler(leases, slots, httpapi.Options{Timeline: timeline,
		Agents: map[string]live.CallProviders{"support": {STT: []string{"deepgram"}, TTS: []string{"elevenlabs", "cartesia"}}}}))
	defer srv.Close()

	call := func(method, path, body string) (int, map[string]any) {
		req, _ := http.NewRequestWithContext(context.Background(), method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return 0, nil
		}
		defer resp.Body.Close()
		var m map[string]any
		if raw, _ := io.ReadAll(resp.Body); len(raw) > 0 {
			_ = json.Unmarshal(raw, &m)
		}
		return resp.StatusCode, m
	}
	asJSON := func(v any) string { b, _ := json.Marshal(v); return string(b) }

	code, got := call("POST", "/v1/slots", `{"org":"acme","campaign":"spring","timeout_ms":30000}`)
	slot := asJSON(got["slot"])
	fmt.Println("slot:", code)
	code, _ = call("POST", "/v1/slots/bind", `{"slot":`+slot+`,"call_id":"call-7"}`)
	fmt.Println("bind:", code)
	code, stt := call("POST", "/v1/calls/call-7/transcriber", `{"agent":"support"}`)
	fmt.Println("transcriber:", code, stt["provider"])
	code, voice := call("POST", "/v1/calls/call-7/voice/start", `{"agent":"support"}`)
	fmt.Println("reply:", code, voice["provider"], "fell back", voice["fell_back"])
	code, _ = call("POST", "/v1/calls/call-7/voice/done", `{"lease":`+asJSON(voice["lease"])+`}`)
	fmt.Println("reply done:", code)
	code, _ = call("POST", "/v1/leases/release", `{"lease":`+asJSON(stt["lease"])+`}`)
	fmt.Println("hang up, transcriber:", code)
	code, _ = call("POST", "/v1/slots/release", `{"slot":`+slot+`}`)
	fmt.Println("hang up, slot:", code)
	code, tl := call("GET", "/v1/calls/call-7/timeline", "")
	for _, e := range tl["events"].([]any) {
		ev := e.(map[string]any)
		fmt.Println("timeline:", code, ev["kind"], ev["provider"])
	}
	// Output:
	// slot: 200
	// bind: 204
	// transcriber: 200 deepgram
	// reply: 200 cartesia fell back true
	// reply done: 204
	// hang up, transcriber: 204
	// hang up, slot: 204
	// timeline: 200 voice_overflow cartesia
}
