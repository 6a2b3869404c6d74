// Package testredis gives each test a client of the real Redis and a key
// prefix of its own.
//
// The server comes from TEST_REDIS_URL (default redis://127.0.0.1:6379/0);
// `make test` sets it to a running server or to a throwaway one it starts.
// A Redis that does not answer fails the test, saying how to start one: a
// test never skips for want of Redis. Tests share the server and its
// database; they are kept apart by key prefix (Prefix), whose keys are
// deleted when the test ends.
package testredis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultURL is the server used when TEST_REDIS_URL is not set.
const DefaultURL = "redis://127.0.0.1:6379/0"

// pingTimeout bounds the first PING of Dial.
const pingTimeout = 3 * time.Second

// URL returns TEST_REDIS_URL, or DefaultURL when it is not set.
func URL() string {
	if u := os.Getenv("TEST_REDIS_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Dial connects to the Redis at URL and pings it, for examples and helper
// processes that have no testing.TB. The error says how to start Redis.
func Dial(ctx context.Context) (*redis.Client, error) {
	url := URL()
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("parsing TEST_REDIS_URL %q: %w", url, err)
	}
	rdb := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("the tests need a real Redis at %s (TEST_REDIS_URL, default %s): %w\n"+
			"Run the tests with `make test`, which reuses a running server or starts a throwaway one,\n"+
			"or start one (`redis-server --port 6379`) and set TEST_REDIS_URL", url, DefaultURL, err)
	}
	return rdb, nil
}

// Client returns a client of the Redis at URL, closed when the test ends.
// It fails the test, saying how to start Redis, when Redis does not answer.
func Client(tb testing.TB) *redis.Client {
	tb.Helper()
	rdb, err := Dial(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// New returns Client(tb) and Prefix(tb, rdb, scope).
func New(tb testing.TB, scope string) (*redis.Client, string) {
	tb.Helper()
	rdb := Client(tb)
	return rdb, Prefix(tb, rdb, scope)
}

// Prefix returns a key prefix that no other test or run uses,
// "cstest:<scope>:<test name>:<random>", and deletes every key under it
// (prefix + ":*") through rdb when the test ends.
func Prefix(tb testing.TB, rdb redis.UniversalClient, scope string) string {
	tb.Helper()
	prefix := UniquePrefix(scope, tb.Name())
	tb.Cleanup(func() { DeleteKeys(rdb, prefix) })
	return prefix
}

// UniquePrefix returns a key prefix that no other test or run uses, for
// callers without a testing.TB; they delete its keys with DeleteKeys.
func UniquePrefix(scope, name string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name = strings.NewReplacer("/", "_", " ", "_").Replace(name)
	return "cstest:" + scope + ":" + name + ":" + hex.EncodeToString(b[:])
}

// DeleteKeys deletes every key under prefix (prefix + ":*").
func DeleteKeys(rdb redis.UniversalClient, prefix string) {
	DeleteMatching(rdb, prefix+":*")
}

// DeleteMatching deletes every key matching the glob pattern, for tests
// that cannot choose their key prefix (the binary's own, with a provider
// name unique to the test).
func DeleteMatching(rdb redis.UniversalClient, pattern string) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}
