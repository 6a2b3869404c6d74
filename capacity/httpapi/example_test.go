package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/httpapi"
	"github.com/callscribe/callscribe/internal/testredis"
)

// A live-call runtime in another language takes a transcriber slot over
// HTTP, refreshes it while the stream runs, and gives it back. The example
// needs the Redis at TEST_REDIS_URL, like the rest of the suite.
func ExampleNewHandler() {
	opt, err := capacity.FailFastOptions(testredis.URL())
	if err != nil {
		fmt.Println(err)
		return
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	prefix := testredis.UniquePrefix("httpapi", "ExampleNewHandler")
	defer testredis.DeleteKeys(rdb, prefix)

	leases, err := capacity.New(capacity.Config{Redis: rdb, KeyPrefix: prefix,
		Limits: map[string]capacity.ProviderLimit{"deepgram/stt": {Limit: 2}}})
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
