package cli_test

import (
	"io"
	"strings"
	"testing"

	"github.com/callscribe/callscribe/cmd/callscribe/cli"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
)

// TestAttackWeakAPIToken: a guessable CALLSCRIBE_API_TOKEN, an admin's
// credential, is refused before serve starts, saying how to make one.
func TestAttackWeakAPIToken(t *testing.T) {
	t.Parallel()
	env := func(tok string) func(string) string {
		return func(k string) string {
			if k == config.EnvAPIToken {
				return tok
			}
			return ""
		}
	}
	for _, weak := range []string{"a", "admin-tok", strings.Repeat("x", 64), "abcdefghijklmnoabcdefghijklmnoabcdefghijklmno"} {
		_, err := config.LoadConfig("", env(weak))
		if err == nil {
			t.Fatalf("config.LoadConfig with %s=%q: no error", config.EnvAPIToken, weak)
		}
		for _, want := range []string{config.EnvAPIToken, "openssl rand -base64 32", "callscribe tokens create --admin"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("config.LoadConfig with %s=%q: %q does not say %q", config.EnvAPIToken, weak, err, want)
			}
		}
	}
	var stderr strings.Builder
	code := cli.Run(t.Context(), []string{"serve", "--addr", "127.0.0.1:0"}, cli.Env{Stdout: io.Discard, Stderr: &stderr, Getenv: env("a")})
	if code == 0 || !strings.Contains(stderr.String(), config.EnvAPIToken) || !strings.Contains(stderr.String(), "openssl rand -base64 32") {
		t.Fatalf("serve with %s=a: exit %d\n%s", config.EnvAPIToken, code, stderr.String())
	}
	for _, good := range []string{
		"q0Zr8kS1vJ3mX9cT2wB7yN5uE4hL6pA0dF8gK1iO3s=",                           // openssl rand -base64 32
		"cs_7_6f1c0a9d2b3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f90", // callscribe tokens create --admin
	} {
		if _, err := config.LoadConfig("", env(good)); err != nil {
			t.Errorf("config.LoadConfig with a proper token: %v", err)
		}
	}
}
