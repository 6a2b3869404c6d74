package sttsim

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/callscribe/callscribe/clock"
	"github.com/callscribe/callscribe/internal/simserver"
)

// epoch is where test clocks start: a Sunday, with a fraction of a second
// so that rounding up to whole seconds is exercised.
var epoch = time.Date(2026, 3, 1, 9, 30, 0, 250_000_000, time.UTC)

// newClock returns a clock at epoch that moves only when told.
func newClock() *clock.Stub { return clock.NewStub(epoch) }

// newScriptedSource returns a rand.Source that returns queued values, then
// "no": with a share strictly between 0 and 1, yes makes chance true and no
// makes it false.
func newScriptedSource() *simserver.ScriptedSource { return &simserver.ScriptedSource{Then: no} }

const (
	yes uint64 = 0
	no  uint64 = 1<<53 - 1
)

// bundle is what a test needs: a Server behind httptest, its clock, a
// directory for audio and a client.
type bundle struct {
	t      *testing.T
	sim    *Server
	ts     *httptest.Server
	clock  *clock.Stub
	dir    string
	client *http.Client
}

// setup starts cfg's Server under httptest. A nil Clock becomes a
// stub clock at epoch (newClock) and a nil Rand a fixed seed.
func setup(t *testing.T, cfg Config) *bundle {
	t.Helper()
	b := &bundle{t: t, dir: t.TempDir()}
	if cfg.Clock == nil {
		b.clock = newClock()
		cfg.Clock = b.clock
	} else if c, ok := cfg.Clock.(*clock.Stub); ok {
		b.clock = c
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.New(rand.NewPCG(1, 2))
	}
	sim, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	b.sim = sim
	b.ts = httptest.NewServer(sim.Handler())
	t.Cleanup(b.ts.Close)
	b.client = b.ts.Client()
	return b
}

// header is a request header override: an empty value removes it.
type header struct{ name, value string }

func bearer(key string) header { return header{"Authorization", "Bearer " + key} }
func idem(key string) header   { return header{"Idempotency-Key", key} }

// answer is what a test reads of a response, whose body is already read
// and closed.
type answer struct {
	StatusCode int
	Header     http.Header
}

// do sends a request with the default key and returns the answer and its
// body.
func (b *bundle) do(method, path string, body any, headers ...header) (answer, []byte) {
	b.t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(v))
	default:
		js, err := json.Marshal(v)
		if err != nil {
			b.t.Fatal(err)
		}
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequest(method, b.ts.URL+path, rd)
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+APIKeyDefault)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, h := range headers {
		if h.value == "" {
			req.Header.Del(h.name)
		} else {
			req.Header.Set(h.name, h.value)
		}
	}
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return answer{StatusCode: resp.StatusCode, Header: resp.Header}, data
}

// submit posts a submission under key.
func (b *bundle) submit(key string, body map[string]any, headers ...header) (answer, []byte) {
	b.t.Helper()
	return b.do(http.MethodPost, "/v1/transcriptions", body, append([]header{idem(key)}, headers...)...)
}

// recording writes a WAV of the given seconds (8 kHz, mono, 16-bit) and
// returns a submission body for it.
func (b *bundle) recording(name string, seconds float64) map[string]any {
	b.t.Helper()
	data := wavFile(wavSpec{rate: 8000, channels: 1, bits: 16, dataBytes: int(seconds * 16000)})
	return b.file(name, data)
}

// file writes data and returns a submission body for it.
func (b *bundle) file(name string, data []byte) map[string]any {
	b.t.Helper()
	path := filepath.Join(b.dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return map[string]any{
		"audio_url":    "file://" + path,
		"audio_sha256": hex.EncodeToString(sum[:]),
		"model":        "general",
		"language":     "en",
		"tenant_id":    "t1",
		"metadata":     map[string]any{"call_id": name},
	}
}

// remoteBody is a submission of http audio with a digest made of d.
func remoteBody(d byte) map[string]any {
	return map[string]any{
		"audio_url":    "https://objects.example.com/rec.wav?sig=x",
		"audio_sha256": hex.EncodeToString(bytes.Repeat([]byte{d}, 32)),
		"model":        "general",
	}
}

// chunk is a RIFF chunk.
type chunk struct {
	id   string
	data []byte
}

func (c chunk) bytes() []byte {
	out := append([]byte(c.id), 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(out[4:], uint32(len(c.data)))
	out = append(out, c.data...)
	if len(c.data)%2 == 1 {
		out = append(out, 0)
	}
	return out
}

// wavSpec describes a WAV file to write.
type wavSpec struct {
	rate, channels, bits int
	dataBytes            int
	before               []chunk // chunks before fmt
	between              []chunk // chunks between fmt and data
	after                []chunk // chunks after data
	declaredData         int     // the data chunk's size field when not 0
	fmtExtra             []byte  // bytes after the 16 of fmt (WAVE_FORMAT_EXTENSIBLE and friends)
}

func wavFile(s wavSpec) []byte {
	fmtData := make([]byte, 16)
	blockAlign := s.channels * s.bits / 8
	binary.LittleEndian.PutUint16(fmtData[0:], 1)
	binary.LittleEndian.PutUint16(fmtData[2:], uint16(s.channels))
	binary.LittleEndian.PutUint32(fmtData[4:], uint32(s.rate))
	binary.LittleEndian.PutUint32(fmtData[8:], uint32(s.rate*blockAlign))
	binary.LittleEndian.PutUint16(fmtData[12:], uint16(blockAlign))
	binary.LittleEndian.PutUint16(fmtData[14:], uint16(s.bits))
	fmtData = append(fmtData, s.fmtExtra...)

	var body []byte
	for _, c := range s.before {
		body = append(body, c.bytes()...)
	}
	body = append(body, chunk{"fmt ", fmtData}.bytes()...)
	for _, c := range s.between {
		body = append(body, c.bytes()...)
	}
	data := chunk{"data", make([]byte, s.dataBytes)}.bytes()
	if s.declaredData != 0 {
		binary.LittleEndian.PutUint32(data[4:], uint32(s.declaredData))
	}
	body = append(body, data...)
	for _, c := range s.after {
		body = append(body, c.bytes()...)
	}
	out := append([]byte("RIFF"), 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(out[4:], uint32(4+len(body)))
	out = append(out, "WAVE"...)
	return append(out, body...)
}

// listChunk is a LIST/INFO chunk of odd size, as recorders write them.
func listChunk() chunk {
	return chunk{"LIST", []byte("INFOISFT\x0b\x00\x00\x00Lavf60.3.10\x00")}
}

// decode unmarshals an answer body, failing the test on error.
func decode[T any](t *testing.T, data []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("decoding %s: %v", data, err)
	}
	return v
}

// wantStatus fails the test unless resp has status want and the JSON
// Content-Type.
func wantStatus(t *testing.T, resp answer, body []byte, want int) {
	t.Helper()
	if resp.StatusCode != want {
		t.Fatalf("status %d, want %d; body %s", resp.StatusCode, want, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != contentType {
		t.Fatalf("Content-Type %q, want %q", ct, contentType)
	}
}

// wantError fails the test unless the answer is an error body of typ with
// status want.
func wantError(t *testing.T, resp answer, body []byte, want int, typ string) {
	t.Helper()
	wantStatus(t, resp, body, want)
	var e struct {
		Error *apiError `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error == nil {
		t.Fatalf("not an error body: %s", body)
	}
	if e.Error.Type != typ || e.Error.Message == "" {
		t.Fatalf("error %+v, want type %q with a message", *e.Error, typ)
	}
}

// eventually polls cond until it holds or 10 seconds pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}
