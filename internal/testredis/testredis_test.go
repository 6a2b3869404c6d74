package testredis_test

import (
	"context"
	"strings"
	"testing"

	"github.com/callscribe/callscribe/internal/testredis"
)

func TestURLDefault(t *testing.T) {
	t.Setenv("TEST_REDIS_URL", "")
	if got := testredis.URL(); got != testredis.DefaultURL {
		t.Errorf("URL() = %q with TEST_REDIS_URL unset, want %q", got, testredis.DefaultURL)
	}
	t.Setenv("TEST_REDIS_URL", "redis://cache:6379/2")
	if got := testredis.URL(); got != "redis://cache:6379/2" {
		t.Errorf("URL() = %q, want TEST_REDIS_URL", got)
	}
}

// A Redis that does not answer is an error that says how to start one.
func TestDialFailsSayingHowToStartRedis(t *testing.T) {
	t.Setenv("TEST_REDIS_URL", "redis://127.0.0.1:1/0")
	_, err := testredis.Dial(context.Background())
	if err == nil {
		t.Fatal("Dial succeeded against a port nothing listens on")
	}
	for _, want := range []string{"redis://127.0.0.1:1/0", "make test", "redis-server", "TEST_REDIS_URL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// Each test's prefix is its own, and its keys are gone when the test ends.
func TestPrefixIsolatesAndCleansUp(t *testing.T) {
	t.Parallel()
	rdb := testredis.Client(t)
	ctx := context.Background()
	var prefixes []string
	t.Run("a", func(t *testing.T) {
		_, p := testredis.New(t, "testredis")
		prefixes = append(prefixes, p)
		if err := rdb.Set(ctx, p+":k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a", func(t *testing.T) { // the same name: another prefix still
		_, p := testredis.New(t, "testredis")
		prefixes = append(prefixes, p)
	})
	if len(prefixes) != 2 || prefixes[0] == prefixes[1] || !strings.HasPrefix(prefixes[0], "cstest:testredis:TestPrefixIsolatesAndCleansUp_a") {
		t.Fatalf("prefixes %q", prefixes)
	}
	if n, err := rdb.Exists(ctx, prefixes[0]+":k").Result(); err != nil || n != 0 {
		t.Errorf("key of a finished test: exists %d, %v", n, err)
	}
}
