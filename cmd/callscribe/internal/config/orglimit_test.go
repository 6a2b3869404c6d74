package config_test

import (
	"strings"
	"testing"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
)

// The default organisation cap: capacity.org_limit, else
// DEFAULT_ORG_CONCURRENCY_LIMIT, else none (capacity's 10); a bad value
// of either is an error naming it.
func TestDefaultOrgLimit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	withKey := writeFile(t, dir, "key.yaml", "capacity:\n  org_limit: 7\n", 0o600)
	without := writeFile(t, dir, "none.yaml", "log:\n  level: info\n", 0o600)
	negative := writeFile(t, dir, "neg.yaml", "capacity:\n  org_limit: -2\n", 0o600)
	cases := []struct {
		name, path, env string
		want            int
		err             string
	}{
		{"built-in", without, "", 0, ""},
		{"env", without, "25", 25, ""},
		{"env with spaces", without, " 25 ", 25, ""},
		{"config wins over env", withKey, "25", 7, ""},
		{"config alone", withKey, "", 7, ""},
		{"no file, env", "", "3", 3, ""},
		{"env not a number", without, "lots", 0, `DEFAULT_ORG_CONCURRENCY_LIMIT: "lots"`},
		{"env zero", without, "0", 0, "DEFAULT_ORG_CONCURRENCY_LIMIT"},
		{"env negative", without, "-4", 0, "DEFAULT_ORG_CONCURRENCY_LIMIT"},
		{"config negative", negative, "", 0, "capacity.org_limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := config.LoadConfig(tc.path, envOf(map[string]string{config.EnvDefaultOrgLimit: tc.env}))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("config.LoadConfig error = %v, want one naming %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Capacity.OrgLimit != tc.want {
				t.Fatalf("capacity.org_limit = %d, want %d", c.Capacity.OrgLimit, tc.want)
			}
		})
	}
}

// capacity.start_rate (the campaigns' and the organisations' rates),
// capacity.gate and capacity.alerts: bad values stop the start with an
// error naming the key; good ones reach live.RateLimiterConfig.
func TestCapacityLiveConfigErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct{ body, want string }{
		{"capacity:\n  start_rate:\n    default: 21\n", "capacity.start_rate.default"},
		{"capacity:\n  start_rate:\n    campaigns:\n      acme:\n        spring: 0\n", "capacity.start_rate.campaigns.acme.spring: 0 must be 1–20"},
		{"capacity:\n  start_rate:\n    campaigns:\n      acme:\n        spring: 25\n", "capacity.start_rate.campaigns.acme.spring: 25"},
		{"capacity:\n  start_rate:\n    org_default: 1001\n", "capacity.start_rate.org_default: 1001 must be 0–1000"},
		{"capacity:\n  start_rate:\n    org_default: -1\n", "capacity.start_rate.org_default"},
		{"capacity:\n  start_rate:\n    orgs: {acme: 0}\n", "capacity.start_rate.orgs.acme: 0 must be 1–1000"},
		{"capacity:\n  start_rate:\n    orgs: {acme: 1001}\n", "capacity.start_rate.orgs.acme: 1001"},
		{"capacity:\n  start_rate:\n    orgs: {\"a b\": 5}\n", "capacity.start_rate.orgs.a b: not an organisation id"},
		{"capacity:\n  gate:\n    size: 50\n    ceilings: {db_pool: 40}\n", "capacity.gate"},
		{"capacity:\n  gate:\n    ceilings: {db_pool: 40}\n", "capacity.gate"},
		{"capacity:\n  alerts:\n    webhook_url: http://alerts.example.com/hook\n", "capacity.alerts.webhook_url"},
		{"capacity:\n  alerts:\n    webhook_url: hooks\n", "capacity.alerts.webhook_url"},
		{"capacity:\n  org_lease_share: 1.5\n", "capacity.org_lease_share: 1.5"},
		{"capacity:\n  org_lease_share: -0.1\n", "capacity.org_lease_share"},
		{"capacity:\n  max_dial_waiters: -1\n", "capacity.max_dial_waiters"},
		{"capacity:\n  redis_timeout: 500us\n", "capacity.redis_timeout: 500µs must be 1ms–1m (unset: 250ms)"},
		{"capacity:\n  redis_admit_timeout: 2m\n", "capacity.redis_admit_timeout: 2m0s must be 1ms–1m (unset: 1s)"},
	} {
		_, err := config.LoadConfig(writeFile(t, dir, "c.yaml", c.body, 0o600), envOf(nil))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%q: error %v, want one naming %q", c.body, err, c.want)
		}
	}
	good := "capacity:\n  start_rate:\n    default: 3\n    campaigns:\n      acme: {spring: 20}\n    org_default: 50\n    orgs: {acme: 5}\n  gate:\n    size: 30\n    ceilings: {db_pool: 40}\n    ticket_ttl: 1h\n  alerts:\n    webhook_url: https://alerts.example.com/hook\n"
	c, err := config.LoadConfig(writeFile(t, dir, "good.yaml", good, 0o600), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Capacity.StartRate.Campaigns["acme"]["spring"] != 20 || c.Capacity.Gate.Size != 30 {
		t.Fatalf("config %+v", c.Capacity)
	}
	rl := c.Capacity.RateLimiterConfig()
	if rl.PerSecond != 3 || rl.Campaigns["acme"]["spring"] != 20 || rl.OrgPerSecond != 50 || rl.Orgs["acme"] != 5 {
		t.Fatalf("RateLimiterConfig %+v", rl)
	}
	// Unset, there is no organisation rate.
	c, err = config.LoadConfig("", envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if rl := c.Capacity.RateLimiterConfig().WithDefaults(); rl.OrgPerSecond != 0 || rl.Orgs != nil {
		t.Fatalf("default RateLimiterConfig %+v, want no organisation rate", rl)
	}
}
