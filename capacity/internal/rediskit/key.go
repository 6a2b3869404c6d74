package rediskit

import "strings"

// Key builds the Redis key prefix:{tag}:part1:part2…, whose hash tag is
// tag. Every key one script touches must use the same tag, so that the
// script's keys live in one Redis Cluster slot; every key capacity and
// capacity/live write is named by Key.
func Key(prefix, tag string, parts ...string) string {
	var b strings.Builder
	b.WriteString(prefix)
	b.WriteString(":{")
	b.WriteString(tag)
	b.WriteString("}")
	for _, p := range parts {
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}
