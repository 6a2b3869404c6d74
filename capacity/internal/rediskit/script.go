package rediskit

import (
	"strconv"

	"github.com/redis/go-redis/v9"
)

// luaNow is the one "now" prelude of every script that reads the clock. It
// sets local now (Unix milliseconds) and now_us (Unix microseconds) from
// Redis TIME, so that every process shares Redis's clock, unless ARGV[1]
// holds a clock override in Unix milliseconds (tests only; "" in
// production).
const luaNow = `
local now, now_us = tonumber(ARGV[1]), nil
if now then
  now_us = now * 1000
else
  local t = redis.call('TIME')
  now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  now = math.floor(now_us / 1000)
end
`

// NowScript returns a Redis script that runs body after the shared "now"
// prelude. body reads the server time from the locals now (Unix
// milliseconds) and now_us (Unix microseconds) and takes its own arguments
// from ARGV[2] on: ARGV[1] is reserved for the clock and must be "" (Redis
// TIME) outside tests.
func NowScript(body string) *redis.Script { return redis.NewScript(luaNow + body) }

// NowArg is ARGV[1] of a NowScript: "" (Redis TIME) for 0, else ms (a
// test's clock).
func NowArg(ms int64) string {
	if ms == 0 {
		return ""
	}
	return strconv.FormatInt(ms, 10)
}
