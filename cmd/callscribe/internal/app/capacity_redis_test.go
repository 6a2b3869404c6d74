package app

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/config"
)

// capacity.redis_timeout bounds the capacity client's round trips (its
// socket timeouts), capacity.redis_admit_timeout the admission counters';
// unset, capacity's defaults do.
func TestCapacityRedisTimeoutConfigured(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		set, want, setAdmit, wantAdmit time.Duration
	}{{0, capacity.OpTimeoutDefault, 0, capacity.AdmitOpTimeoutDefault}, {3 * time.Second, 3 * time.Second, 5 * time.Second, 5 * time.Second}} {
		a := &App{Config: config.Config{RedisURL: "redis://127.0.0.1:1/0",
			Capacity: config.CapacityConfig{RedisTimeout: c.set, RedisAdmitTimeout: c.setAdmit}}}
		r, err := a.NewCapacityRedis()
		if err != nil {
			t.Fatal(err)
		}
		opt := r.Client().(*redis.Client).Options()
		if opt.ReadTimeout != c.want || opt.WriteTimeout != c.want || opt.DialTimeout != c.want {
			t.Errorf("redis_timeout %s: read %s, write %s, dial %s, want %s", c.set, opt.ReadTimeout, opt.WriteTimeout, opt.DialTimeout, c.want)
		}
		if got := r.Kit().AdmitTimeout; got != c.wantAdmit {
			t.Errorf("redis_admit_timeout %s: %s, want %s", c.setAdmit, got, c.wantAdmit)
		}
		_ = r.Close()
	}
}

// capacity.window.release_linger above a second stops the start with an
// error naming the key (a release waiting for the next acquire counts its
// slot as held); unset, negative or up to a second it opens the windows.
func TestWindowReleaseLingerConfigured(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		set    time.Duration
		refuse bool
	}{{0, false}, {-1, false}, {20 * time.Millisecond, false}, {time.Second, false}, {2 * time.Second, true}} {
		a := &App{Config: config.Config{RedisURL: "redis://127.0.0.1:1/0",
			Capacity: config.CapacityConfig{Window: config.CapacityWindow{ReleaseLinger: c.set}}}}
		r, err := a.NewCapacityRedis()
		if err != nil {
			t.Fatal(err)
		}
		w, err := a.OpenWindows(r)
		switch {
		case c.refuse && (err == nil || !strings.Contains(err.Error(), "capacity.window.release_linger")):
			t.Errorf("release_linger %s: %v, want an error naming capacity.window.release_linger", c.set, err)
		case !c.refuse && (err != nil || w == nil):
			t.Errorf("release_linger %s: %v", c.set, err)
		}
		_ = r.Close()
	}
}
