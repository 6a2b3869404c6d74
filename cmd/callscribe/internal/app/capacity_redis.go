package app

import (
	"fmt"

	"github.com/callscribe/callscribe/capacity"
)

// NewCapacityRedis dials the configured Redis (redis_url) as the one
// handle every capacity counter of this process shares: fail-fast client
// options, the default key prefix, the round-trip bounds configured
// (capacity.redis_timeout, redis_admit_timeout), fail-open warnings to
// a.Logger. Close it when done.
func (a *App) NewCapacityRedis() (*capacity.Redis, error) {
	r, err := capacity.NewRedis(capacity.RedisConfig{URL: a.Config.RedisURL, Logger: a.Logger,
		OpTimeout: a.Config.Capacity.RedisTimeout, AdmitOpTimeout: a.Config.Capacity.RedisAdmitTimeout})
	if err != nil {
		return nil, fmt.Errorf("redis_url %s: %w", RedactURL(a.Config.RedisURL), err)
	}
	return r, nil
}
