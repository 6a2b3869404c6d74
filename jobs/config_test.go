package jobs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/stt"
	"github.com/callscribe/callscribe/ledger"
)

// The derived throttling scope names the vendor account and the model the
// requests really ask for: a tenant that names no model uses its adapter's
// default, so it shares the scope of a tenant on the same account that
// names that model. Otherwise one tenant's 429 would not hold back the
// other's submissions to the same vendor quota. The account is the
// tenant's account label, else the host of its vendor's endpoint.
func TestDerivedScopeNamesTheModelSent(t *testing.T) {
	t.Parallel()
	cfg := jobs.Config{Tenants: map[string]jobs.TenantConfig{
		"implicit": {Provider: stt.KindOpenAI, APIKey: "sk-shared"},
		"explicit": {Provider: stt.KindOpenAI, APIKey: "sk-shared", Model: stt.OpenAIModelDefault},
		"other":    {Provider: stt.KindOpenAI, APIKey: "sk-shared", Model: "gpt-4o-transcribe"},
		"own-key":  {Provider: stt.KindOpenAI, APIKey: "sk-other", Account: "second-account"},
		"generic":  {Provider: stt.KindGenericHTTP, BaseURL: "http://STT.internal:8080/v1", APIKey: "sk-shared"},
		"named":    {Provider: stt.KindOpenAI, APIKey: "sk-shared", Scope: "openai-main"},
	}}.WithDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	scope := func(id string) string { return cfg.Tenants[id].Scope }
	for id, want := range map[string]string{
		"implicit": "openai:api.openai.com:" + stt.OpenAIModelDefault,
		"explicit": "openai:api.openai.com:" + stt.OpenAIModelDefault,
		"other":    "openai:api.openai.com:gpt-4o-transcribe",
		"own-key":  "openai:second-account:" + stt.OpenAIModelDefault,
		"generic":  "generic-http:stt.internal:8080:" + stt.GenericHTTPModelDefault,
		"named":    "openai-main",
	} {
		if got := scope(id); got != want {
			t.Errorf("tenant %s: scope %q, want %q", id, got, want)
		}
	}
}

// Tenants with different keys of one vendor would derive one scope unless
// they name their accounts: Validate refuses them, naming the key to set,
// and never the keys. A bad account label is refused too.
func TestDifferentKeysMustNameTheirAccounts(t *testing.T) {
	t.Parallel()
	cfg := jobs.Config{Tenants: map[string]jobs.TenantConfig{
		"acme":  {Provider: stt.KindOpenAI, APIKey: "sk-acme-secret"},
		"rival": {Provider: stt.KindOpenAI, APIKey: "sk-rival-secret"},
		"same":  {Provider: stt.KindOpenAI, APIKey: "sk-acme-secret"},
		"bad":   {Provider: stt.KindDeepgram, APIKey: "k", Account: "a:b"},
	}}.WithDefaults()
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), `Tenants["rival"].Account`) || !strings.Contains(err.Error(), `Tenants["bad"].Account`) {
		t.Fatalf(`Validate() = %v, want errors naming Tenants["rival"].Account and Tenants["bad"].Account`, err)
	}
	if strings.Contains(err.Error(), `Tenants["same"]`) || strings.Contains(err.Error(), "secret") {
		t.Fatalf("Validate() = %v: it refuses a tenant sharing acme's key, or prints a key", err)
	}
}

// A cohort nobody set observes (Config.RolloutDefault's default), and
// the default takes only the two modes, named by field when wrong.
func TestRolloutDefaultObserves(t *testing.T) {
	t.Parallel()
	if got := (jobs.Config{}).WithDefaults().RolloutDefault; got != ledger.RolloutObserve || jobs.RolloutDefaultDefault != ledger.RolloutObserve {
		t.Fatalf("default rollout mode %q (RolloutDefaultDefault %q), want observe", got, jobs.RolloutDefaultDefault)
	}
	if got := (jobs.Config{RolloutDefault: ledger.RolloutEnforce}).WithDefaults().RolloutDefault; got != ledger.RolloutEnforce {
		t.Fatalf("rollout default enforce became %q", got)
	}
	err := jobs.Config{RolloutDefault: "sometimes"}.WithDefaults().Validate()
	if err == nil || !strings.Contains(err.Error(), "RolloutDefault") || !strings.Contains(err.Error(), "observe or enforce") {
		t.Fatalf("a bad rollout default: %v, want an error naming RolloutDefault", err)
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
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "FetchCooldown:") {
		t.Fatalf("Validate() = %v, want an error naming FetchCooldown", err)
	}
}

// Validate names each field by its Go path, the fields its message refers
// to by their Go names; MinConfidence may be 0, and unset is the default.
func TestValidateNamesGoPaths(t *testing.T) {
	t.Parallel()
	zero, two := 0.0, 2.0
	cfg := jobs.Config{StepTimeout: 10 * time.Minute, RescueAfter: 5 * time.Minute, Tenants: map[string]jobs.TenantConfig{
		"t1":   {Provider: stt.KindGenericHTTP, APIKey: "k", MinConfidence: &two},
		"zero": {Provider: stt.KindGenericHTTP, APIKey: "k", MinConfidence: &zero},
	}}.WithDefaults()
	err := cfg.Validate()
	for _, want := range []string{`Tenants["t1"].MinConfidence: 2 is not within 0..1`, "RescueAfter: 5m0s must exceed StepTimeout 10m0s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want %q", err, want)
		}
	}
	if strings.Contains(err.Error(), `"zero"`) {
		t.Errorf("Validate() = %v: MinConfidence 0 refused", err)
	}
	if m := cfg.Tenants["zero"].MinConfidence; *m != 0 {
		t.Errorf("MinConfidence 0 became %v", *m)
	}
	if m := (jobs.TenantConfig{}).WithDefaults().MinConfidence; m == nil || *m != jobs.MinConfidenceDefault {
		t.Errorf("unset MinConfidence is %v, want %v", m, jobs.MinConfidenceDefault)
	}
}
