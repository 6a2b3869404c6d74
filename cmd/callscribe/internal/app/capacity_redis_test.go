package app

import (
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
