package sttsim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
)

// A throttling server: the first submission is refused with a cooldown,
// and Stats keeps the evidence.
func Example() {
	sim, err := sttsim.New(sttsim.Config{
		RateLimitShare: 1, // every submission outside a cooldown starts one
		Cooldown:       5 * time.Second,
		RetryAfterForm: sttsim.FormIMFFixdate,
		Clock:          clock.NewStub(time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)),
	})
	if err != nil {
		panic(err)
	}
	ts := httptest.NewServer(sim.Handler())
	defer ts.Close()

	body := `{"audio_url": "https://objects.example.com/call-42.wav", "audio_sha256": "` + strings.Repeat("9f", 32) + `", "model": "general"}`
	for _, admitted := range []string{"", "2026-03-01T09:29:59Z"} {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, ts.URL+"/v1/transcriptions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+sttsim.APIKeyDefault)
		req.Header.Set("Idempotency-Key", "t1:call-42:9f9f")
		if admitted != "" {
			req.Header.Set("X-Admitted-At", admitted)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		var e struct {
			Error struct{ Type string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		_ = resp.Body.Close()
		fmt.Println(resp.StatusCode, e.Error.Type, resp.Header.Get("Retry-After"))
	}
	st := sim.Stats()
	fmt.Println("cooldowns:", len(st.Cooldowns), "deadline:", st.Cooldowns[0].Deadline.Format(time.RFC3339))
	fmt.Println("in flight:", st.Arrivals[1].InFlight, "violations:", len(st.Violations))
	// Output:
	// 429 rate_limited Sun, 01 Mar 2026 09:30:05 GMT
	// 429 rate_limited Sun, 01 Mar 2026 09:30:05 GMT
	// cooldowns: 1 deadline: 2026-03-01T09:30:05Z
	// in flight: true violations: 0
}

// A well-behaved server answers a submission with its transcription.
func ExampleServer_Handler() {
	sim, err := sttsim.New(sttsim.Config{
		ExpectedText: map[string]string{strings.Repeat("ab", 32): "Hi, this is Dana from Northline Freight."},
	})
	if err != nil {
		panic(err)
	}
	ts := httptest.NewServer(sim.Handler())
	defer ts.Close()

	body := `{"audio_url": "https://objects.example.com/a.wav", "audio_sha256": "` + strings.Repeat("ab", 32) + `", "metadata": {"call_id": "call-42"}}`
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, ts.URL+"/v1/transcriptions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer sim-key")
	req.Header.Set("Idempotency-Key", "t1:call-42:abab")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var tr struct {
		Status   string
		Text     string
		Language string
		Metadata map[string]string
	}
	_ = json.NewDecoder(resp.Body).Decode(&tr)
	fmt.Println(resp.StatusCode, tr.Status, tr.Language, tr.Metadata["call_id"])
	fmt.Println(tr.Text)
	fmt.Println("transcribed:", sim.Transcriptions("t1:call-42:abab"))
	// Output:
	// 200 completed en call-42
	// Hi, this is Dana from Northline Freight.
	// transcribed: 1
}
