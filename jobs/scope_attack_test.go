package jobs_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/internal/testdb"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/audio"
	"github.com/callscribe/callscribe/jobs/stt"
	"github.com/callscribe/callscribe/jobs/stt/sttsim"
	"github.com/callscribe/callscribe/ledger"
)

// keyHashes are the hex digests of key that a name could carry, whole and
// cut to 8 digits (the old derived scope's).
func keyHashes(key string) []string {
	sum := sha256.Sum256([]byte(key))
	h := hex.EncodeToString(sum[:])
	return []string{h, h[:8]}
}

// A derived scope is named by the vendor account's label or its
// endpoint's host, never by the key: the name shows in every recording's
// events (which a tenant reads through the API), in metrics and in logs,
// and sha256(api_key)[:8] there fingerprints the key (tells whose keys are
// the same, confirms a guessed key). Here a recording goes through a
// vendor with a tenant that names no account, and neither the scope nor
// any event of the recording carries the key or its hash.
func TestAttackScopeNamesHoldNoKeyHash(t *testing.T) {
	t.Parallel()
	for _, tc := range []jobs.TenantConfig{
		{Provider: stt.KindOpenAI, APIKey: "sk-live-0123456789"},
		{Provider: stt.KindDeepgram, APIKey: "dg-secret", Model: "nova-3"},
		{Provider: stt.KindAssemblyAI, APIKey: "aai-secret", Account: "acme-prod"},
		{Provider: stt.KindGenericHTTP, BaseURL: "https://stt.example.com", APIKey: "g-secret"},
	} {
		scope := jobs.Config{Tenants: map[string]jobs.TenantConfig{"t": tc}}.WithDefaults().Tenants["t"].Scope
		for _, leak := range append(keyHashes(tc.APIKey), tc.APIKey) {
			if strings.Contains(scope, leak) {
				t.Errorf("%s: scope %q carries %q", tc.Provider, scope, leak)
			}
		}
	}

	sim, err := sttsim.New(sttsim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	tenant := jobs.TenantConfig{Provider: stt.KindGenericHTTP, BaseURL: srv.URL, APIKey: sttsim.APIKeyDefault, Model: "general"}
	e, files := setup(t, sttsim.Config{}, jobs.Config{Tenants: map[string]jobs.TenantConfig{"t1": tenant}}, 1)
	scope := e.pipeline.Config().Tenants["t1"].Scope
	if want := "generic-http:" + strings.TrimPrefix(srv.URL, "http://") + ":general"; scope != want {
		t.Fatalf("scope %q, want %q (provider, host, model)", scope, want)
	}
	id := e.ingestAll(t, files)[0]
	e.start(t)
	e.waitRecording(t, id, 30*time.Second, "past its submission", func(r ledger.Recording) bool { return r.Attempt > 0 && r.State != ledger.StateEligible })
	evs, err := e.ledger.Events(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(evs)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), scope) {
		t.Fatalf("no event names the scope %q: the check below proves nothing\n%s", scope, raw)
	}
	for _, leak := range keyHashes(sttsim.APIKeyDefault) {
		if strings.Contains(string(raw), leak) {
			t.Errorf("the recording's events carry the key's hash %q:\n%s", leak, raw)
		}
	}
}

// Renaming a derived scope from the key's hash to the account keeps what
// was in force under the old name: the first step's AdoptFormerScopes
// carries the deadline, the pending probe and the pause over to the new
// name, once; the old name's row and its offers stay, to be read; a new
// name that already has state is left alone.
func TestScopeRenameCarriesTheFormerScopeOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	l, err := ledger.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	store, err := audio.Open(ctx, audio.Config{URL: "file://" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	cfg := jobs.Config{Tenants: map[string]jobs.TenantConfig{
		"acme":  {Provider: stt.KindOpenAI, APIKey: "sk-acme"},
		"named": {Provider: stt.KindOpenAI, APIKey: "sk-named", Scope: "openai-main"},
	}}
	former := "openai:" + keyHashes("sk-acme")[1] + ":" + stt.OpenAIModelDefault
	scope := "openai:api.openai.com:" + stt.OpenAIModelDefault

	until := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	if _, err := l.ScopeDeferralExtend(ctx, ledger.Extension{Scope: former, NotBefore: until, Source: "retry-after", Reason: "429 before the rename"}); err != nil {
		t.Fatal(err)
	}
	if err := l.ScopePause(ctx, former, "quota_exhausted: before the rename"); err != nil {
		t.Fatal(err)
	}
	p, err := jobs.New(pool, l, cfg, jobs.Deps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Config().Tenants["acme"].Scope; got != scope {
		t.Fatalf("acme's scope %q, want %q", got, scope)
	}
	if err := p.AdoptFormerScopes(ctx); err != nil {
		t.Fatal(err)
	}
	d, err := l.ScopeDeferral(ctx, scope)
	if err != nil {
		t.Fatal(err)
	}
	if !d.NotBefore.Equal(until) || !d.NeedsProbe || !d.Paused || !strings.Contains(d.PausedReason, "before the rename") {
		t.Fatalf("the renamed scope: %+v, want the former's deadline %s, probe and pause", d, until)
	}
	if old, err := l.ScopeDeferral(ctx, former); err != nil || !old.Paused || !old.NotBefore.Equal(until) {
		t.Fatalf("the former scope: %+v, %v; want it kept as it was", old, err)
	}
	if exts, err := l.ScopeDeferralExtensions(ctx, former); err != nil || len(exts) != 1 {
		t.Fatalf("the former scope's offers: %v, %v; want its one offer kept", exts, err)
	}
	// Once: state written under the new name is not overwritten by a
	// later process's adoption.
	if err := l.ScopeResume(ctx, scope); err != nil {
		t.Fatal(err)
	}
	p2, err := jobs.New(pool, l, cfg, jobs.Deps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.AdoptFormerScopes(ctx); err != nil {
		t.Fatal(err)
	}
	if d, err := l.ScopeDeferral(ctx, scope); err != nil || d.Paused {
		t.Fatalf("after resuming the new name and adopting again: %+v, %v; want it still resumed", d, err)
	}
	// A scope set by name has no former one.
	if d, err := l.ScopeDeferral(ctx, "openai-main"); err != nil || !d.NotBefore.IsZero() || d.Paused {
		t.Fatalf("openai-main: %+v, %v; want nothing adopted", d, err)
	}
}
