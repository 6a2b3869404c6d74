// Package live holds the live-call rules built on capacity's leases and
// counters: how a call in progress takes its vendor slots, and how calls
// are admitted before they start.
//
// Transcriber: ConnectTranscriber takes one transcriber slot (KindSTT, Live
// lane) per call for its whole length; a fallback with room becomes the
// call's transcriber, and when nothing has room the call connects to the
// primary anyway, flagged OverLimit and holding no lease. HangUp gives the
// slot back.
//
// Voice: one voice slot (KindTTS) per reply, taken when the reply starts
// speaking and released when it is done; a full primary overflows to a
// fallback voice, and when every voice is full a reply waits up to 1.5 s,
// then goes ahead over the limit. Each overflow is a warning Event of the
// Voice and, with VoiceOptions.Timeline, an event on the call's shared
// timeline, as is each wait.
//
// Timeline: each call's events (over-limit connections, transcriber
// fallbacks, voice overflows and waits, dial steps) in a Redis stream per
// call, stamped with Redis's time, trimmed to about 256 events and expiring
// 24 h after the last, plus a bounded stream of recent events of all calls.
//
// Dialer: before an outbound call is dialled, one of its voices must have
// room and a transcriber slot is reserved under the call's id; calls with
// no room wait in a queue, re-checked whenever a call ends and every 10 s.
// The queue and the reservations are in Redis, shared by every process:
// one process re-checks at a time, calls for the same providers are
// dialled first in, first out, and a call is reserved once (ZREM wins).
//
// RateLimiter: calls started per second per campaign of an organisation
// (1–20, default 1) and, when configured, per organisation across all its
// campaigns (1–1000, default none), each over a one-second sliding window
// counted in Redis (server time, through capacity's shared "now" script
// prelude). One script checks both windows: a start is counted in both or
// in neither, and a refusal names the limit that refused. Dialer,
// Timeline and RateLimiter are built on the process's one capacity.Redis
// handle, as is Gate: an admission gate in front of the pools a call
// holds for its whole length (vendor plan, trunk), one semaphore in Redis
// shared by every process with a gate of its name: tickets in a sorted set
// scored by their expiry (Redis time), reclaimed after their TTL, left
// through any process; it logs each admission, rejection, leave and
// reclaim with the call's id.
//
// Guarantees: like capacity, nothing here returns a Redis error into a
// call. When Redis is unreachable, slots are granted uncounted, starts
// go through and the gate admits uncounted (fail open); an over-limit connection or reply holds no lease,
// so the lease sets never go above a limit. Everything is safe for
// concurrent use.
//
// What it does not do: it keeps no lease alive (the process's
// capacity.Heartbeat does), does not call a vendor, and remembers a Voice's
// connected fallbacks only in that Voice (a process's memory). It imports
// capacity and no other callscribe package.
package live
