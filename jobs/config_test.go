package jobs_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/stt"
)

// The derived throttling scope names the vendor account and the model the
// requests really ask for: a tenant that names no model uses its adapter's
// default, so it shares the scope of a tenant on the same key that names
// that model. Otherwise one tenant's 429 would not hold back the other's
// submissions to the same vendor quota.
func TestDerivedScopeNamesTheModelSent(t *testing.T) {
	t.Parallel()
	sum := sha256.Sum256([]byte("sk-shared"))
	account := hex.EncodeToString(sum[:])[:8]
	cfg := jobs.Config{Tenants: map[string]jobs.TenantConfig{
		"implicit": {Provider: stt.KindOpenAI, APIKey: "sk-shared"},
		"explicit": {Provider: stt.KindOpenAI, APIKey: "sk-shared", Model: stt.OpenAIModelDefault},
		"other":    {Provider: stt.KindOpenAI, APIKey: "sk-shared", Model: "gpt-4o-transcribe"},
		"own-key":  {Provider: stt.KindOpenAI, APIKey: "sk-other"},
		"generic":  {Provider: stt.KindGenericHTTP, BaseURL: "http://stt.internal", APIKey: "sk-shared"},
		"named":    {Provider: stt.KindOpenAI, APIKey: "sk-shared", Scope: "openai-main"},
	}}.WithDefaults()
	scope := func(id string) string { return cfg.Tenants[id].Scope }
	for id, want := range map[string]string{
		"implicit": "openai:" + account + ":" + stt.OpenAIModelDefault,
		"explicit": "openai:" + account + ":" + stt.OpenAIModelDefault,
		"other":    "openai:" + account + ":gpt-4o-transcribe",
		"generic":  "generic-http:" + account + ":" + stt.GenericHTTPModelDefault,
		"named":    "openai-main",
	} {
		if got := scope(id); got != want {
			t.Errorf("tenant %s: scope %q, want %q", id, got, want)
		}
	}
	if scope("own-key") == scope("implicit") {
		t.Errorf("tenants with different keys share scope %q", scope("own-key"))
	}
}

// The fetch cooldown defaults to FetchCooldownDefault, and one below
// River's minimum is refused, naming the setting.
func TestFetchCooldown(t *testing.T) {
	t.Parallel()
	if got := (jobs.Config{}).WithDefaults().FetchCooldown; got != jobs.FetchCooldownDefault {
		t.Fatalf("default fetch cooldown %s, want %s", got, jobs.FetchCooldownDefault)
	}
	cfg := jobs.Config{FetchCooldown: time.Microsecond}.WithDefaults()
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "pipeline.fetch_cooldown") {
		t.Fatalf("Validate() = %v, want an error naming pipeline.fetch_cooldown", err)
	}
}
