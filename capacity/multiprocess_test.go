package capacity_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/internal/testredis"
)

// The multi-process test's plan: one organisation capped at 10 calls, six
// campaigns capped at 5 each, 300 calls; a transcriber plan of 6 (so
// dials queue), a primary voice of 3 and a fallback of 2 (so replies
// overflow and wait).
const (
	mpCalls     = 300
	mpOrgCap    = 10
	mpCampCap   = 5
	mpSTTLimit  = 6
	mpVoiceCap  = 3
	mpFallCap   = 2
	mpServes    = 3
	mpReplies   = 2
	mpCampaigns = 6
)

// TestLiveCallsAcrossServeProcesses runs three `callscribe serve`
// processes on one Redis and 300 simulated calls of one organisation
// against them through the HTTP API, each step of a call sent to the next
// process in turn: start permit, call slot (waiting), bind, caller ID,
// dial (queued when the transcriber plan is full, polled until reserved),
// answered, two replies with a voice slot each, ended, caller ID and slot
// released. At every instant
// the calls observe, no cap is exceeded: the holders the clients count
// (a client counts a slot from its grant to just before its release, so
// its count is never above the server's) and the leases Redis counts,
// sampled throughout; and no caller ID is held by two calls at once. At
// the end every slot, voice slot, reservation and caller ID is back. Then calls that die holding everything are reclaimed once Redis
// time is past their timeout.
func TestLiveCallsAcrossServeProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	id := fmt.Sprintf("mp%d-%d", os.Getpid(), time.Now().UnixNano()%1_000_000)
	stt, voice, fallback, org := id+"-stt", id+"-voice", id+"-fallback", id+"-org"
	campaigns := make([]string, mpCampaigns)
	var campCaps, startRates strings.Builder
	for i := range campaigns {
		campaigns[i] = fmt.Sprintf("c%d", i)
		fmt.Fprintf(&campCaps, "%s: %d, ", campaigns[i], mpCampCap)
		fmt.Fprintf(&startRates, "%s: 20, ", campaigns[i])
	}
	config := filepath.Join(t.TempDir(), "callscribe.yaml")
	// The caps hold while Redis answers; past a round trip's bound a step
	// goes ahead uncounted (fail open, tested on its own). With every
	// package's tests running at once a round trip can pass the default
	// 250 ms, so the processes here wait up to 5 s: an uncounted grant
	// still fails the test, by its own message.
	body := fmt.Sprintf(`capacity:
  redis_timeout: 5s
  redis_admit_timeout: 5s
  limits:
    %[1]s/stt: {limit: %[5]d}
    %[2]s/tts: {limit: %[6]d}
    %[3]s/tts: {limit: %[7]d}
  orgs:
    %[4]s: {limit: %[8]d, campaigns: {%[9]s}}
  start_rate:
    campaigns: {%[4]s: {%[10]s}}
  agents:
    support: {stt: [%[1]s], tts: [%[2]s, %[3]s]}
`, stt, voice, fallback, org, mpSTTLimit, mpVoiceCap, mpFallCap, mpOrgCap,
		strings.TrimSuffix(campCaps.String(), ", "), strings.TrimSuffix(startRates.String(), ", "))
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	rdb := testredis.Client(t)
	t.Cleanup(func() {
		testredis.DeleteMatching(rdb, "*"+id+"*")
		_ = rdb.SRem(context.Background(), "callscribe:cap:{registry}:orgs", org).Err()
	})

	// The organisation's caller IDs: as many as its cap, so a call never
	// waits for one, and any two calls holding the same one would show.
	pool, err := capacity.NewCallerIDs(captest.OnRedis(t, rdb, ""), capacity.CallerIDsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var numbers []string
	for i := range mpOrgCap {
		numbers = append(numbers, fmt.Sprintf("+1555%07d", i))
	}
	if _, err := pool.Add(ctx, org, numbers...); err != nil {
		t.Fatal(err)
	}

	bin := buildCallscribe(t)
	const token = "mp-token-0123456789-abcdefghijklmnopqrstuvwxyz" // CALLSCRIBE_API_TOKEN: long enough for serve
	bases := make([]string, mpServes)
	for i := range bases {
		bases[i] = startServe(t, bin, config, token)
	}
	api := &mpAPI{t: t, token: token, bases: bases, client: &http.Client{Timeout: 3 * time.Minute}}

	// The leases as Redis counts them, read by a process of the test's own.
	leases, err := capacity.New(captest.OnRedis(t, rdb, ""), capacity.Config{Limits: map[string]capacity.ProviderLimit{
		stt + "/stt": {Limit: mpSTTLimit}, voice + "/tts": {Limit: mpVoiceCap}, fallback + "/tts": {Limit: mpFallCap}}})
	if err != nil {
		t.Fatal(err)
	}
	limits := map[string]int{stt: mpSTTLimit, voice: mpVoiceCap, fallback: mpFallCap}
	sampled := &maxima{}
	stopSampling := make(chan struct{})
	sampling := make(chan struct{})
	go func() {
		defer close(sampling)
		for {
			st, err := leases.Status(ctx)
			if err == nil {
				for _, p := range st {
					if _, ours := limits[p.Provider]; ours {
						sampled.see("redis "+p.Provider, p.InUse)
					}
				}
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()

	// The clients' own counts of what they hold.
	held := &holders{counts: map[string]*atomic.Int64{}}
	var wg sync.WaitGroup
	errs := make(chan error, mpCalls)
	start := time.Now()
	for i := range mpCalls {
		wg.Go(func() {
			if err := mpCall(api, held, i, org, campaigns[i%len(campaigns)], fmt.Sprintf("%s-call-%d", id, i)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(stopSampling)
	<-sampling
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d calls through %d serve processes in %s; highest counts: clients %v, Redis %v",
		mpCalls, mpServes, time.Since(start).Round(time.Millisecond), held.maxima.snapshot(), sampled.snapshot())

	caps := map[string]int{"org": mpOrgCap, "stt": mpSTTLimit, "voice " + voice: mpVoiceCap, "voice " + fallback: mpFallCap,
		"redis " + stt: mpSTTLimit, "redis " + voice: mpVoiceCap, "redis " + fallback: mpFallCap}
	for _, c := range campaigns {
		caps["campaign "+c] = mpCampCap
	}
	for name, peak := range mergeMaps(held.maxima.snapshot(), sampled.snapshot()) {
		limit, ok := caps[name]
		if !ok {
			t.Fatalf("count %q has no cap", name)
		}
		if peak > limit {
			t.Errorf("%s: %d held at once, cap %d", name, peak, limit)
		}
	}
	// The caps were reached: the test exercised them.
	if got := held.maxima.get("org"); got != mpOrgCap {
		t.Errorf("at most %d calls of the organisation at once, want its cap %d reached", got, mpOrgCap)
	}
	if got := sampled.get("redis " + stt); got < mpSTTLimit-1 {
		t.Errorf("at most %d transcribers at once, want the plan (%d) nearly reached", got, mpSTTLimit)
	}

	if held.queued.Load() == 0 {
		t.Errorf("no dial was queued: the transcriber plan (%d) below the organisation's cap (%d) should queue some", mpSTTLimit, mpOrgCap)
	}
	t.Logf("%d of %d dials were queued first", held.queued.Load(), mpCalls)

	// Everything came back.
	assertAllBack(t, ctx, api, leases, limits, id)
	if err := api.tryNoWait(org, campaigns[:2], mpOrgCap); err != nil {
		t.Fatalf("after the calls, the organisation's %d slots: %v", mpOrgCap, err)
	}

	// Calls that die holding their slot, reservation and voice slot.
	deadCalls(t, api, org, campaigns, id)
	if code, m := api.post(0, "/v1/slots", map[string]any{"org": org, "campaign": campaigns[2], "timeout_ms": 0}); code != http.StatusConflict {
		t.Fatalf("with %d dead calls holding the organisation's slots: %d %v, want 409 no_slot", mpOrgCap, code, m)
	}
	// Redis time advanced past the timeouts: the next acquisitions, made
	// by the test's own process with its scripts' clock moved, reclaim them.
	later := time.Now().Add(capacity.StaleAfterDefault + time.Minute)
	slots, err := capacity.NewSlots(captest.OnRedis(t, rdb, ""), capacity.SlotsConfig{Orgs: map[string]capacity.OrgSlots{org: {Limit: mpOrgCap}}})
	if err != nil {
		t.Fatal(err)
	}
	capacity.SetSlotsNowForTest(slots, later)
	var taken []capacity.Slot
	for i := range mpOrgCap {
		s, err := slots.Acquire(ctx, org, campaigns[i%2], 0, 0)
		if err != nil {
			t.Fatalf("slot %d of %d with Redis time past the dead calls' timeout: %v", i+1, mpOrgCap, err)
		}
		taken = append(taken, s)
	}
	for _, s := range taken {
		if err := s.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	advanced, err := capacity.New(captest.OnRedis(t, rdb, ""), capacity.WithTestNow(capacity.Config{Limits: map[string]capacity.ProviderLimit{
		stt + "/stt": {Limit: mpSTTLimit}, voice + "/tts": {Limit: mpVoiceCap}}}, later.UnixMilli))
	if err != nil {
		t.Fatal(err)
	}
	for provider, kind := range map[string]string{stt: capacity.KindSTT, voice: capacity.KindTTS} {
		var got []capacity.Lease
		for i := range limits[provider] {
			l, g := advanced.Acquire(ctx, capacity.Request{Provider: provider, Kind: kind, Holder: "reclaimer"})
			if !g.Granted || g.Uncounted {
				t.Fatalf("%s lease %d of %d with Redis time past the dead calls' leases: %+v", provider, i+1, limits[provider], g)
			}
			got = append(got, l)
		}
		for _, l := range got {
			advanced.Release(ctx, l)
		}
	}
	if code, m := api.post(0, "/v1/caller-ids:acquire", map[string]any{"org": org, "call_id": id + "-late"}); code != http.StatusConflict {
		t.Fatalf("with every caller ID held by a dead call: %d %v, want 409 no_caller_id", code, m)
	}
	reclaimer, err := capacity.NewCallerIDs(captest.OnRedis(t, rdb, ""), capacity.CallerIDsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	capacity.SetCallerIDsNowForTest(reclaimer, later)
	for i := range mpOrgCap {
		c, err := reclaimer.Acquire(ctx, org, fmt.Sprintf("%s-reclaim-%d", id, i))
		if err != nil {
			t.Fatalf("caller ID %d of %d with Redis time past the dead calls' timeout: %v", i+1, mpOrgCap, err)
		}
		if freed, err := reclaimer.Release(ctx, org, c.Number, c.Token); err != nil || !freed {
			t.Fatalf("releasing %s: %v, %v", c.Number, freed, err)
		}
	}
	// And the serve processes, on Redis's own clock, grant again.
	if err := api.tryNoWait(org, campaigns[2:4], mpOrgCap); err != nil {
		t.Fatalf("after the dead calls were reclaimed: %v", err)
	}
	assertAllBack(t, ctx, api, leases, limits, id)
}

// mpCall is one simulated call; step k goes to serve process (i+k) % 3.
func mpCall(api *mpAPI, held *holders, i int, org, campaign, callID string) error {
	step := i
	next := func() int { step++; return step }
	fail := func(what string, code int, m map[string]any) error {
		return fmt.Errorf("call %s: %s: HTTP %d %v", callID, what, code, m)
	}
	if code, m := api.post(next(), "/v1/calls:start", map[string]any{"org": org, "campaign": campaign, "timeout_ms": 60000}); code != http.StatusOK {
		return fail("start permit", code, m)
	}
	code, m := api.post(next(), "/v1/slots", map[string]any{"org": org, "campaign": campaign, "timeout_ms": 120000, "retry_ms": 50})
	if code != http.StatusOK {
		return fail("slot", code, m)
	}
	slot := m["slot"]
	if sm, _ := slot.(map[string]any); sm["uncounted"] == true {
		return fail("slot granted uncounted", code, m)
	}
	held.add("org", 1)
	held.add("campaign "+campaign, 1)
	if code, m := api.post(next(), "/v1/slots/bind", map[string]any{"slot": slot, "call_id": callID}); code != http.StatusNoContent {
		return fail("bind", code, m)
	}
	code, cid := api.post(next(), "/v1/caller-ids:acquire", map[string]any{"org": org, "call_id": callID})
	if code != http.StatusOK {
		return fail("caller ID", code, cid)
	}
	number := fmt.Sprint(cid["number"])
	if !held.take(number, callID) {
		return fail("caller ID "+number+" given while another call held it", code, cid)
	}

	code, m = api.post(next(), "/v1/calls/"+callID+"/dial", map[string]any{"agent": "support"})
	if code == http.StatusAccepted {
		held.queued.Add(1)
	}
	for deadline := time.Now().Add(2 * time.Minute); code == http.StatusAccepted; {
		if time.Now().After(deadline) {
			return fail("dial still queued after 2 minutes", code, m)
		}
		code, m = api.get(next(), "/v1/calls/"+callID+"/dial?wait_ms=5000")
	}
	if code != http.StatusOK || m["state"] != "reserved" {
		return fail("dial", code, m)
	}
	tr, _ := m["transcriber"].(map[string]any)
	if tr == nil || tr["lease"] == nil || tr["over_limit"] == true || !leaseCounted(tr["lease"]) {
		return fail("a reservation without a counted transcriber (see the serve processes' fail-open warnings)", code, m)
	}
	held.add("stt", 1)
	if code, m := api.post(next(), "/v1/calls/"+callID+"/answered", map[string]any{}); code != http.StatusOK {
		return fail("answered", code, m)
	}
	for range mpReplies {
		code, v := api.post(next(), "/v1/calls/"+callID+"/voice/start", map[string]any{"agent": "support"})
		if code != http.StatusOK {
			return fail("voice start", code, v)
		}
		name := fmt.Sprint(v["provider"])
		if v["lease"] != nil && !leaseCounted(v["lease"]) {
			return fail("a voice slot granted uncounted (see the serve processes' fail-open warnings)", code, v)
		}
		if v["lease"] != nil {
			held.add("voice "+name, 1)
		}
		time.Sleep(5 * time.Millisecond) // speaking
		if v["lease"] != nil {
			held.add("voice "+name, -1)
			if code, d := api.post(next(), "/v1/calls/"+callID+"/voice/done", map[string]any{"lease": v["lease"]}); code != http.StatusNoContent {
				return fail("voice done", code, d)
			}
		}
	}
	held.add("stt", -1)
	if code, m := api.post(next(), "/v1/calls/"+callID+"/ended", map[string]any{}); code != http.StatusNoContent {
		return fail("ended", code, m)
	}
	held.give(number)
	if code, m := api.post(next(), "/v1/caller-ids:release", map[string]any{"org": org, "number": number, "token": cid["token"]}); code != http.StatusNoContent {
		return fail("caller ID release", code, m)
	}
	held.add("org", -1)
	held.add("campaign "+campaign, -1)
	if code, m := api.post(next(), "/v1/slots/release", map[string]any{"slot": slot}); code != http.StatusNoContent {
		return fail("slot release", code, m)
	}
	return nil
}

// leaseCounted reports whether a lease the API answered is counted in
// Redis: one granted uncounted (fail open) is in no count the test samples.
func leaseCounted(lease any) bool {
	l, _ := lease.(map[string]any)
	return l["counted"] == true
}

// deadCalls starts mpOrgCap calls, five in each of the first two
// campaigns, that take their slot, bind it, take a caller ID, get their
// transcriber reserved
// (the first mpSTTLimit) and a voice slot (the first mpVoiceCap), then die
// without giving anything back.
func deadCalls(t *testing.T, api *mpAPI, org string, campaigns []string, id string) {
	t.Helper()
	for i := range mpOrgCap {
		callID := fmt.Sprintf("%s-dead-%d", id, i)
		code, m := api.post(i, "/v1/slots", map[string]any{"org": org, "campaign": campaigns[i%2], "timeout_ms": 0})
		if code != http.StatusOK {
			t.Fatalf("dead call %d: slot: %d %v", i, code, m)
		}
		if code, m := api.post(i+1, "/v1/slots/bind", map[string]any{"slot": m["slot"], "call_id": callID}); code != http.StatusNoContent {
			t.Fatalf("dead call %d: bind: %d %v", i, code, m)
		}
		if code, m := api.post(i+1, "/v1/caller-ids:acquire", map[string]any{"org": org, "call_id": callID}); code != http.StatusOK {
			t.Fatalf("dead call %d: caller ID: %d %v", i, code, m)
		}
		if i < mpSTTLimit {
			if code, m := api.post(i+2, "/v1/calls/"+callID+"/dial", map[string]any{"agent": "support"}); code != http.StatusOK {
				t.Fatalf("dead call %d: dial: %d %v", i, code, m)
			}
		}
		if i < mpVoiceCap {
			if code, m := api.post(i, "/v1/calls/"+callID+"/voice/start", map[string]any{"agent": "support"}); code != http.StatusOK || m["lease"] == nil {
				t.Fatalf("dead call %d: voice: %d %v", i, code, m)
			}
		}
	}
}

// assertAllBack fails unless no lease of the test's providers is held and
// no call of the test waits in the dial queue.
func assertAllBack(t *testing.T, ctx context.Context, api *mpAPI, leases *capacity.Leases, limits map[string]int, id string) {
	t.Helper()
	org := id + "-org"
	code, ids := api.get(0, "/v1/caller-ids?org="+org)
	if code != http.StatusOK || ids["busy"] != float64(0) || ids["free"] != float64(mpOrgCap) {
		t.Fatalf("the organisation's caller IDs: %d %v, want all %d free", code, ids, mpOrgCap)
	}
	st, err := leases.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st {
		if _, ours := limits[p.Provider]; ours && p.InUse != 0 {
			t.Fatalf("%s/%s: %d leases still held", p.Provider, p.Kind, p.InUse)
		}
	}
	code, q := api.get(0, "/v1/dial-queue")
	if code != http.StatusOK {
		t.Fatalf("GET /v1/dial-queue: %d %v", code, q)
	}
	for _, c := range q["calls"].([]any) {
		if strings.HasPrefix(fmt.Sprint(c.(map[string]any)["call_id"]), id) {
			t.Fatalf("a call of the test still queued: %v", c)
		}
	}
}

// mpAPI sends requests to the serve processes, by step in turn.
type mpAPI struct {
	t      *testing.T
	token  string
	bases  []string
	client *http.Client
}

func (a *mpAPI) do(step int, method, path string, body any) (int, map[string]any) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, map[string]any{"marshal": err.Error()}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, a.bases[step%len(a.bases)]+path, rd)
	if err != nil {
		return 0, map[string]any{"request": err.Error()}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, map[string]any{"transport": err.Error()}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &m); err != nil {
			m = map[string]any{"body": string(raw)}
		}
	}
	return resp.StatusCode, m
}

func (a *mpAPI) post(step int, path string, body any) (int, map[string]any) {
	return a.do(step, http.MethodPost, path, body)
}

func (a *mpAPI) get(step int, path string) (int, map[string]any) {
	return a.do(step, http.MethodGet, path, nil)
}

// tryNoWait takes n slots of org at once (timeout 0), in campaigns in
// turn, one per serve process in turn, and gives them back.
func (a *mpAPI) tryNoWait(org string, campaigns []string, n int) error {
	var slots []any
	defer func() {
		for i, s := range slots {
			a.post(i, "/v1/slots/release", map[string]any{"slot": s})
		}
	}()
	for i := range n {
		code, m := a.post(i, "/v1/slots", map[string]any{"org": org, "campaign": campaigns[i%len(campaigns)], "timeout_ms": 0})
		if code != http.StatusOK {
			return fmt.Errorf("slot %d of %d: HTTP %d %v", i+1, n, code, m)
		}
		slots = append(slots, m["slot"])
	}
	return nil
}

// holders counts what the clients hold, by name, and keeps each count's
// highest value.
type holders struct {
	// queued counts the dials that were queued first.
	queued atomic.Int64
	mu     sync.Mutex
	counts map[string]*atomic.Int64
	maxima maxima
	// numbers: the caller IDs held, by number, and by which call.
	numbers map[string]string
}

// take records that callID holds number, and reports false if another
// call holds it.
func (h *holders) take(number, callID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.numbers == nil {
		h.numbers = map[string]string{}
	}
	if other, busy := h.numbers[number]; busy && other != callID {
		return false
	}
	h.numbers[number] = callID
	return true
}

// give records that number's holder is about to release it.
func (h *holders) give(number string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.numbers, number)
}

func (h *holders) add(name string, d int64) {
	h.mu.Lock()
	c, ok := h.counts[name]
	if !ok {
		c = &atomic.Int64{}
		h.counts[name] = c
	}
	h.mu.Unlock()
	h.maxima.see(name, int(c.Add(d)))
}

// maxima keeps the highest value seen of each count.
type maxima struct {
	mu sync.Mutex
	m  map[string]int
}

func (x *maxima) see(name string, v int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.m == nil {
		x.m = map[string]int{}
	}
	if v > x.m[name] {
		x.m[name] = v
	}
}

func (x *maxima) get(name string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.m[name]
}

func (x *maxima) snapshot() map[string]int {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make(map[string]int, len(x.m))
	for k, v := range x.m {
		out[k] = v
	}
	return out
}

func mergeMaps(a, b map[string]int) map[string]int {
	out := make(map[string]int, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// buildCallscribe builds the callscribe binary once per test run.
func buildCallscribe(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "callscribe-mp-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "callscribe")
		out, err := exec.Command("go", "build", "-o", builtBin, "github.com/callscribe/callscribe/cmd/callscribe").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

var serveListening = regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)`)

// startServe starts `callscribe serve` as a process of its own on a free
// port and returns its base URL; it is stopped (SIGTERM) when the test ends.
func startServe(t *testing.T, bin, config, token string) string {
	t.Helper()
	cmd := exec.Command(bin, "--config", config, "serve", "--addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "CALLSCRIBE_REDIS_URL="+testredis.URL(), "CALLSCRIBE_API_TOKEN="+token)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		// A failure may come from the process: show what it warned of
		// (fail-open grants, Redis round trips that timed out).
		if t.Failed() {
			for line := range strings.Lines(stderr.String()) {
				if strings.Contains(line, "WARN") || strings.Contains(line, "ERROR") {
					t.Logf("serve %d: %s", cmd.Process.Pid, strings.TrimSpace(line))
				}
			}
		}
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := serveListening.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case base := <-found:
		return base
	case <-time.After(30 * time.Second):
		t.Fatalf("serve printed no address in 30s; stderr:\n%s", stderr.String())
		return ""
	}
}
