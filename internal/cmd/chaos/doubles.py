#!/usr/bin/env python3
"""Independent test doubles for `make chaos` (internal/cmd/chaos).

Written from docs/stt-http-v1.md and docs/crm-webhook-v1.md alone, with the
Python standard library, so that the chaos run does not judge callscribe by
the project's own simulators (jobs/stt/sttsim, crm/crmsim). Two servers on
loopback, each a ThreadingHTTPServer:

stt-http/v1 vendor
    POST /v1/transcriptions answers synchronously: 200 with a completed
    transcription whose duration is the WAV header's (the file named by the
    file:// audio_url, its SHA-256 checked) and a confidence of 0.9 or more.
    A share of submissions (--rate-limit-share) is refused with 429
    rate_limited and a Retry-After that starts a cooldown of the scope (the
    API key plus the model) of --cooldown-min..--cooldown-max seconds; the
    header alternates at random between delay-seconds and an IMF-fixdate,
    and every answer carries a Date header from the same clock. The
    cooldown announced is what the header says: N seconds after the answer
    for delay-seconds, the date itself for an HTTP-date (the date is rounded
    up to a whole second and Date down, so a client measuring the date
    against Date waits at least that long). A submission that arrives while
    a cooldown of its scope is running is refused with 429 and the time
    left (delay-seconds, rounded up); it starts no new cooldown.
    One transcription per Idempotency-Key: the same key with the same body
    returns the original (200, or 202 while it is still being made), with a
    different body 422 idempotency_key_reused. GET /v1/transcriptions/{id}
    polls, GET /v1/transcriptions?idempotency_key= reconciles (404 for a key
    never accepted). POST /v1/batches is 404 (no batches offered).

    Every submission is logged (stt-arrivals.jsonl in --log-dir): its
    arrival time, its key and scope, its X-Admitted-At, what it was
    answered, and whether it arrived inside a cooldown the double had
    already announced (the announcing 429 fully written before the
    arrival), with how long after that 429 was sent.

crm-webhook/v1 CRM
    POST /v1/action-sets applies each Idempotency-Key once: 201 the first
    time, 200 with the first id for a replay of the same body, 409
    idempotency_key_reused for a different body. A share of deliveries is
    refused first with 429 (Retry-After in delay-seconds, as a date, or
    missing) or 503 (half of them with Retry-After: 1). Applications are
    counted per key; crm-deliveries.jsonl logs every delivery.

GET /stats on each server (no authentication) returns its counters as
JSON for the driver. The process prints one JSON line with both base URLs
on stdout once it listens, and exits when stdin closes (its parent is gone)
or on SIGTERM/SIGINT.
"""

import argparse
import email.utils
import hashlib
import json
import math
import os
import random
import signal
import struct
import sys
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

JSON_TYPE = "application/json; charset=utf-8"

SENTENCES = [
    "Thanks for the call. I'll send you the rate sheet for Chicago to Dallas by Friday.",
    "Please move the pickup for shipment PO 4471 to Tuesday between 8 and 10 am.",
    "Good talking today. Let's talk again next Wednesday about the Milwaukee volume.",
    "We can hold the trailer until tomorrow afternoon if the paperwork is ready.",
    "The driver is running late; expect the delivery around noon instead of nine.",
    "Can you confirm the lumper fee for the Atlanta drop before we book the load?",
]


def now():
    return time.time()


def iso(t):
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def parse_rfc3339(s):
    if not s:
        return None
    try:
        return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def wav_duration(data):
    """Seconds of audio in a RIFF/WAVE file, from its fmt and data chunks."""
    if len(data) < 12 or data[0:4] not in (b"RIFF", b"RF64") or data[8:12] != b"WAVE":
        raise ValueError("not a RIFF/WAVE file")
    pos, byte_rate, data_size = 12, None, None
    while pos + 8 <= len(data):
        cid = data[pos:pos + 4]
        size = struct.unpack_from("<I", data, pos + 4)[0]
        body = pos + 8
        if cid == b"fmt ":
            byte_rate = struct.unpack_from("<I", data, body + 8)[0]
        elif cid == b"data":
            data_size = min(size, len(data) - body)
        pos = body + size + (size & 1)
    if not byte_rate or data_size is None:
        raise ValueError("WAV without fmt or data chunk")
    return data_size / byte_rate


class JSONLog:
    """Appends one JSON object per line to a file, thread-safe."""

    def __init__(self, path):
        self.lock = threading.Lock()
        self.f = open(path, "a", encoding="utf-8") if path else None

    def write(self, obj):
        if self.f is None:
            return
        line = json.dumps(obj, sort_keys=True)
        with self.lock:
            self.f.write(line + "\n")
            self.f.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "chaos-double/1"

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def answer(self, status, obj, headers=None, date_at=None):
        """Writes one answer; Date from date_at (default now), whole seconds."""
        data = b"" if obj is None else json.dumps(obj).encode()
        self.send_response_only(status)
        self.send_header("Server", self.server_version)
        self.send_header("Date", email.utils.formatdate(date_at if date_at is not None else now(), usegmt=True))
        if obj is not None:
            self.send_header("Content-Type", JSON_TYPE)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def error(self, status, typ, message, headers=None, date_at=None):
        self.answer(status, {"error": {"type": typ, "message": message}}, headers, date_at)

    def bearer(self):
        h = self.headers.get("Authorization") or ""
        return h[len("Bearer "):] if h.startswith("Bearer ") else None

    def do_GET(self):
        try:
            self.route("GET")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_POST(self):
        try:
            self.route("POST")
        except (BrokenPipeError, ConnectionResetError):
            pass


# ---------------------------------------------------------------- stt-http/v1


class STT:
    def __init__(self, args, log):
        self.keys = set(k for k in args.stt_keys.split(",") if k)
        self.share = args.rate_limit_share
        self.cool_min, self.cool_max = args.cooldown_min, args.cooldown_max
        self.lat_min, self.lat_max = args.latency_min, args.latency_max
        self.refuse_in_cooldown = not args.serve_in_cooldown
        self.rng = random.Random(args.seed)
        self.log = log
        self.lock = threading.Lock()
        self.by_key = {}  # idempotency key -> record
        self.by_id = {}  # transcription id -> record
        self.cooldowns = {}  # scope -> {"until", "decided_at", "sent_at", "form", "n"}
        self.next_id = 0
        self.cooldown_n = 0
        self.st = {
            "submissions": 0,
            "completed": 0,
            "throttled_announcing": 0,
            "throttled_announcing_by_form": {"delay-seconds": 0, "imf-fixdate": 0},
            "throttled_in_cooldown": 0,
            "replays": 0,
            "replays_pending": 0,
            "key_reused": 0,
            "invalid": 0,
            "unauthorized": 0,
            "polls": 0,
            "reconciles_found": 0,
            "reconciles_not_found": 0,
            "batches_refused": 0,
            "transcriptions": {},  # key -> how many times this double transcribed it
            # Arrivals inside a cooldown the double had announced (the
            # announcing 429 written before the arrival): in-flight late
            # arrivals unless their X-Admitted-At is after that 429.
            "inside_announced": [],
            # Arrivals after a 429 was decided but before it was written:
            # no client could have known of it.
            "inside_unannounced": 0,
        }

    def stats(self):
        with self.lock:
            return json.loads(json.dumps(self.st))

    def scope_of(self, key, model):
        return hashlib.sha256(key.encode()).hexdigest()[:8] + ":" + model

    def route(self, h, method):
        path = urlsplit(h.path)
        if method == "GET" and path.path == "/stats":
            return h.answer(200, self.stats())
        if h.bearer() not in self.keys:
            if method == "POST":
                h.body()
            with self.lock:
                self.st["unauthorized"] += 1
            return h.error(401, "unauthorized", "missing or unknown API key")
        if method == "POST" and path.path == "/v1/transcriptions":
            return self.submit(h)
        if method == "POST" and path.path == "/v1/batches":
            h.body()
            with self.lock:
                self.st["batches_refused"] += 1
            return h.error(404, "not_found", "this server offers no batches")
        if method == "GET" and path.path == "/v1/transcriptions":
            keys = parse_qs(path.query).get("idempotency_key") or [""]
            return self.reconcile(h, keys[0])
        if method == "GET" and path.path.startswith("/v1/transcriptions/"):
            return self.poll(h, unquote(path.path[len("/v1/transcriptions/"):]))
        if method == "POST":
            h.body()
        return h.error(404, "not_found", "no such route")

    def transcription(self, rec):
        t = dict(rec["t"])
        t["segments"] = [dict(s) for s in t["segments"]]
        return t

    def submit(self, h):
        arrival = now()
        raw = h.body()
        key = h.headers.get("Idempotency-Key") or ""
        admitted_at = h.headers.get("X-Admitted-At") or ""
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except ValueError:
            body = None
        model = body.get("model") if body else None
        entry = {"arrival": iso(arrival), "arrival_unix": arrival, "key": key, "admitted_at": admitted_at}
        if not key or body is None or not model or not body.get("audio_url") or not body.get("audio_sha256") or not body.get("tenant_id"):
            with self.lock:
                self.st["invalid"] += 1
                self.st["submissions"] += 1
            entry["answer"] = "400"
            self.log.write(entry)
            return h.error(400, "invalid_request", "Idempotency-Key, audio_url, audio_sha256, model and tenant_id are required")
        scope = self.scope_of(h.bearer(), model)
        entry["scope"] = scope

        with self.lock:
            self.st["submissions"] += 1
            cd = self.cooldowns.get(scope)
            inside = cd is not None and arrival < cd["until"]
            if inside:
                entry["cooldown"] = cd["n"]
                entry["cooldown_until"] = iso(cd["until"])
                if cd["sent_at"] is not None and cd["sent_at"] <= arrival:
                    since = arrival - cd["sent_at"]
                    entry["inside_announced_cooldown"] = True
                    entry["since_announcing_429_ms"] = round(since * 1000, 3)
                    adm = parse_rfc3339(admitted_at)
                    self.st["inside_announced"].append({
                        "key": key, "scope": scope, "cooldown": cd["n"], "arrival": iso(arrival),
                        "since_announcing_429_ms": round(since * 1000, 3),
                        "before_cooldown_end_ms": round((cd["until"] - arrival) * 1000, 3),
                        "admitted_at": admitted_at,
                        # The client's own admission instant against the
                        # announcement: before it, the request was in flight.
                        "admitted_before_announcement": adm is not None and adm < cd["sent_at"],
                    })
                else:
                    entry["inside_announced_cooldown"] = False
                    self.st["inside_unannounced"] += 1
            else:
                entry["inside_announced_cooldown"] = False
            throttle_new = False
            if inside and self.refuse_in_cooldown:
                self.st["throttled_in_cooldown"] += 1
                left = max(1, math.ceil(cd["until"] - arrival))
            elif self.rng.random() < self.share:
                throttle_new = True
                length = self.rng.uniform(self.cool_min, self.cool_max)
                form = "delay-seconds" if self.rng.random() < 0.5 else "imf-fixdate"
                self.cooldown_n += 1
                t = now()
                if form == "delay-seconds":
                    n = max(1, math.ceil(length))
                    ra, until = str(n), t + n
                else:
                    # The date rounded up to a whole second, Date (from t)
                    # down: date - Date is at least the cooldown left.
                    until = float(math.ceil(t + length))
                    ra = email.utils.formatdate(until, usegmt=True)
                # In effect from now; announced once the 429 is written
                # (sent_at, below).
                cd = {"n": self.cooldown_n, "form": form, "decided_at": t, "sent_at": None, "until": until}
                self.cooldowns[scope] = cd
                self.st["throttled_announcing"] += 1
                self.st["throttled_announcing_by_form"][form] += 1
            latency = self.rng.uniform(self.lat_min, self.lat_max)

        if inside and self.refuse_in_cooldown:
            entry["answer"] = "429 in cooldown"
            entry["retry_after"] = str(left)
            self.log.write(entry)
            return h.error(429, "rate_limited", "rate limit: the scope is cooling down", {"Retry-After": str(left)})

        if throttle_new:
            entry.update({"answer": "429 announcing", "cooldown": cd["n"], "retry_after": ra, "retry_after_form": cd["form"],
                          "cooldown_until": iso(until)})
            try:
                h.error(429, "rate_limited", "rate limit exceeded for this key and model", {"Retry-After": ra}, date_at=t)
            finally:
                with self.lock:
                    cd["sent_at"] = now()
                entry["sent_at"] = iso(cd["sent_at"])
                self.log.write(entry)
            return None

        # Not throttled: one transcription per key.
        url = urlsplit(body["audio_url"])
        try:
            if url.scheme != "file":
                raise ValueError("only file:// audio URLs are served here")
            with open(unquote(url.path), "rb") as f:
                audio = f.read()
            if hashlib.sha256(audio).hexdigest() != body["audio_sha256"]:
                raise ValueError("audio_sha256 does not match the audio")
            duration = wav_duration(audio)
        except (OSError, ValueError) as e:
            with self.lock:
                self.st["invalid"] += 1
            entry["answer"] = "400"
            self.log.write(entry)
            return h.error(400, "invalid_request", str(e))
        fingerprint = json.dumps(body, sort_keys=True)
        with self.lock:
            rec = self.by_key.get(key)
            if rec is not None:
                if rec["fingerprint"] != fingerprint:
                    self.st["key_reused"] += 1
                    entry["answer"] = "422"
                    reused = True
                else:
                    reused = False
                    self.st["replays"] += 1
                    done = rec["t"]["status"] == "completed"
                    if not done:
                        self.st["replays_pending"] += 1
                    t = self.transcription(rec)
                    entry["answer"] = "replay 200" if done else "replay 202"
            else:
                self.next_id += 1
                tid = "tr_%d" % self.next_id
                rng = random.Random(key)
                conf = round(0.9 + 0.09 * rng.random(), 3)
                text = SENTENCES[rng.randrange(len(SENTENCES))]
                reported = round(duration * (1 + rng.uniform(-0.02, 0.02)), 3)
                rec = {"fingerprint": fingerprint, "t": {
                    "id": tid, "idempotency_key": key, "status": "processing", "text": None,
                    "language": body.get("language") or "en", "confidence": conf, "duration_seconds": reported,
                    "segments": [{"start": 0.0, "end": reported, "text": text, "confidence": conf}],
                    "metadata": body.get("metadata"), "error": None}, "text": text}
                self.by_key[key] = rec
                self.by_id[tid] = rec
                self.st["transcriptions"][key] = self.st["transcriptions"].get(key, 0) + 1
                rec = None
        if rec is not None:
            self.log.write(entry)
            if reused:
                return h.error(422, "idempotency_key_reused", "this Idempotency-Key was used with a different body")
            return h.answer(200 if t["status"] == "completed" else 202, t)

        time.sleep(latency)  # transcribing
        with self.lock:
            rec = self.by_key[key]
            rec["t"]["status"] = "completed"
            rec["t"]["text"] = rec["text"]
            self.st["completed"] += 1
            t = self.transcription(rec)
        entry["answer"] = "200"
        self.log.write(entry)
        return h.answer(200, t)

    def poll(self, h, tid):
        with self.lock:
            self.st["polls"] += 1
            rec = self.by_id.get(tid)
            t = self.transcription(rec) if rec else None
        if t is None:
            return h.error(404, "not_found", "no transcription with this id")
        return h.answer(200, t)

    def reconcile(self, h, key):
        with self.lock:
            rec = self.by_key.get(key) if key else None
            if rec is None:
                self.st["reconciles_not_found"] += 1
                t = None
            else:
                self.st["reconciles_found"] += 1
                t = self.transcription(rec)
        if t is None:
            return h.error(404, "not_found", "no request was accepted with this idempotency key")
        return h.answer(200, t)


# ------------------------------------------------------------ crm-webhook/v1


class CRM:
    def __init__(self, args, log):
        self.token = args.crm_token
        self.share_429, self.share_503 = args.crm_429_share, args.crm_503_share
        self.lat_min, self.lat_max = args.crm_latency_min, args.crm_latency_max
        self.rng = random.Random(args.seed + 1)
        self.log = log
        self.lock = threading.Lock()
        self.applied = {}  # key -> {"id", "canon", "applied_at"}
        self.next_id = 0
        self.st = {
            "deliveries": 0, "applied": 0, "replays": 0, "conflicts": 0, "throttled": 0, "unavailable": 0,
            "invalid": 0, "unauthorized": 0,
            "applications": {},  # key -> how many times this CRM applied it
        }

    def stats(self):
        with self.lock:
            return json.loads(json.dumps(self.st))

    def route(self, h, method):
        path = urlsplit(h.path)
        if method == "GET" and path.path == "/stats":
            return h.answer(200, self.stats())
        if method != "POST" or path.path != "/v1/action-sets":
            if method == "POST":
                h.body()
            return h.error(404, "not_found", "no such route")
        raw = h.body()
        entry = {"arrival": iso(now()), "key": h.headers.get("Idempotency-Key") or "",
                 "attempt": h.headers.get("X-Delivery-Attempt") or ""}
        if h.bearer() != self.token:
            with self.lock:
                self.st["unauthorized"] += 1
            entry["answer"] = "401"
            self.log.write(entry)
            return h.error(401, "unauthorized", "missing or wrong token")
        key, attempt = entry["key"], entry["attempt"]
        try:
            body = json.loads(raw)
            if not isinstance(body, dict) or not key or not attempt.isdigit() or int(attempt) < 1:
                raise ValueError
        except ValueError:
            with self.lock:
                self.st["invalid"] += 1
            entry["answer"] = "400"
            self.log.write(entry)
            return h.error(400, "invalid_request", "a JSON object, Idempotency-Key and X-Delivery-Attempt are required")
        with self.lock:
            self.st["deliveries"] += 1
            r = self.rng.random()
            latency = self.rng.uniform(self.lat_min, self.lat_max)
            form = self.rng.choice(["delay-seconds", "imf-fixdate", "missing"])
            with_ra = self.rng.random() < 0.5
            if r < self.share_429:
                self.st["throttled"] += 1
                outcome = "429"
            elif r < self.share_429 + self.share_503:
                self.st["unavailable"] += 1
                outcome = "503"
            else:
                outcome = None
        if outcome == "429":
            t = now()
            headers = {}
            if form == "delay-seconds":
                headers["Retry-After"] = "1"
            elif form == "imf-fixdate":
                headers["Retry-After"] = email.utils.formatdate(math.ceil(t + 1), usegmt=True)
            entry.update({"answer": "429", "retry_after": headers.get("Retry-After")})
            self.log.write(entry)
            return h.error(429, "rate_limited", "this integration's quota is spent", headers, date_at=t)
        if outcome == "503":
            headers = {"Retry-After": "1"} if with_ra else {}
            entry.update({"answer": "503", "retry_after": headers.get("Retry-After")})
            self.log.write(entry)
            return h.error(503, "unavailable", "try again later", headers)
        canon = json.dumps(body, sort_keys=True)
        time.sleep(latency)
        with self.lock:
            prior = self.applied.get(key)
            if prior is None:
                self.next_id += 1
                prior = {"id": "crm_%d" % self.next_id, "canon": canon, "applied_at": now()}
                self.applied[key] = prior
                self.st["applied"] += 1
                self.st["applications"][key] = self.st["applications"].get(key, 0) + 1
                status = 201
            elif prior["canon"] != canon:
                self.st["conflicts"] += 1
                status = 409
            else:
                self.st["replays"] += 1
                status = 200
        entry["answer"] = str(status)
        self.log.write(entry)
        if status == 409:
            return h.error(409, "idempotency_key_reused", "this key was applied with a different body")
        applied_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(prior["applied_at"]))
        return h.answer(status, {"id": prior["id"], "applied_at": applied_at})


def serve(app):
    class H(Handler):
        def route(self, method):
            return app.route(self, method)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    srv.daemon_threads = True
    srv.request_queue_size = 128
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--stt-keys", default="chaos-key-a,chaos-key-b", help="comma-separated API keys the vendor accepts")
    p.add_argument("--crm-token", default="chaos-crm-token")
    p.add_argument("--rate-limit-share", type=float, default=0.2, help="share of submissions answered 429 with a new cooldown")
    p.add_argument("--cooldown-min", type=float, default=1.0, help="seconds")
    p.add_argument("--cooldown-max", type=float, default=2.0, help="seconds")
    p.add_argument("--latency-min", type=float, default=0.02, help="seconds a transcription takes, at least")
    p.add_argument("--latency-max", type=float, default=0.15)
    p.add_argument("--serve-in-cooldown", action="store_true", help="transcribe submissions that arrive inside a cooldown instead of refusing them")
    p.add_argument("--crm-429-share", type=float, default=0.05)
    p.add_argument("--crm-503-share", type=float, default=0.05)
    p.add_argument("--crm-latency-min", type=float, default=0.005)
    p.add_argument("--crm-latency-max", type=float, default=0.06)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--log-dir", default="", help="write stt-arrivals.jsonl and crm-deliveries.jsonl here")
    args = p.parse_args()

    def path(name):
        return os.path.join(args.log_dir, name) if args.log_dir else None

    stt = serve(STT(args, JSONLog(path("stt-arrivals.jsonl"))))
    crm = serve(CRM(args, JSONLog(path("crm-deliveries.jsonl"))))
    print(json.dumps({"stt": "http://127.0.0.1:%d" % stt.server_address[1],
                      "crm": "http://127.0.0.1:%d" % crm.server_address[1]}), flush=True)

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    def watch_stdin():
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except OSError:
            pass
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    while not stop.wait(0.5):
        pass
    stt.shutdown()
    crm.shutdown()


if __name__ == "__main__":
    main()
