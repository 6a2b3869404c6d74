#!/usr/bin/env python3
"""One live call's lifecycle against callscribe's capacity API (`callscribe serve`).

A voice runtime written in Python takes, for each call:

  1. a call slot of its organisation and campaign   POST /v1/slots (waits up to timeout_ms)
  2. binds the slot to the call                     POST /v1/slots/bind
  3. connects the call's transcriber                POST /v1/calls/{id}/transcriber
  4. for every reply, a voice slot while it speaks  POST /v1/calls/{id}/voice/start, /voice/done
  5. keeps its leases alive while the call lasts    POST /v1/leases/refresh
  6. at hang-up gives everything back               POST /v1/leases/release, /v1/slots/release

and can read what happened to the call afterwards  GET /v1/calls/{id}/timeline.

When a vendor refuses a stream that callscribe had room for, the runtime
says so: POST /v1/providers/{provider}/{kind}/refusals with the leases in
use when the vendor refused. Below the limit in force, callscribe lowers
the platform-wide limit to in_use - 1 and alerts its operators (open_stream;
--refused runs it once against a vendor that refuses).

The API fails open: when its Redis is down, answers say "uncounted" and the
call goes ahead. Nothing here needs more than the standard library.

    python3 live_call.py --base http://127.0.0.1:8080 --token TOKEN \
        --org acme --campaign spring --agent support --call-id call-1 --replies 3 \
        [--refused deepgram/stt]

It prints one line per step and exits 0, or prints what went wrong to stderr
and exits 1 (after giving back whatever it had taken).
"""

import argparse
import json
import sys
import time
import urllib.error
import urllib.request


class APIError(Exception):
    """A non-2xx answer: the HTTP status and the API's error object."""

    def __init__(self, method, path, status, error):
        self.status, self.error = status, error
        super().__init__(f"{method} {path}: HTTP {status} {error.get('type', '')}: {error.get('message', '')}")


class Capacity:
    """A minimal client of the capacity API."""

    def __init__(self, base, token=None, timeout=150):
        self.base, self.token, self.timeout = base.rstrip("/"), token, timeout

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
                return json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                error = json.loads(raw).get("error", {})
            except ValueError:
                error = {"message": raw.decode(errors="replace")[:200]}
            raise APIError(method, path, e.code, error) from None

    def post(self, path, body):
        return self.call("POST", path, body)

    def get(self, path):
        return self.call("GET", path)

    def report_refusal(self, provider, kind, in_use):
        """Tells callscribe the vendor refused a stream of provider/kind while
        in_use leases were held (the refused stream's own included). The answer
        says the limit before and after and whether it was lowered."""
        return self.post(f"/v1/providers/{provider}/{kind}/refusals", {"in_use": in_use})


class VendorRefused(Exception):
    """The vendor refused to open a stream: it is at its own concurrency limit."""


def open_stream(api, provider, kind, holder, connect, out=print):
    """Takes a live lease of provider/kind and opens the stream with connect().

    Returns (lease, stream), or None when callscribe has no room or the vendor
    refuses. A vendor's refusal is reported with the in-use count the lease was
    granted at (callscribe had room, so the vendor's real limit is lower than
    the one in force), and the lease is given back. A lease granted uncounted
    (callscribe's Redis is down) has no count to report.
    """
    grant = api.post("/v1/leases", {"provider": provider, "kind": kind, "holder": holder, "lane": "live"})
    if not grant["granted"]:
        out(f"{provider}/{kind} full: {grant['in_use']} in use of {grant['limit']}")
        return None
    lease = grant["lease"]
    try:
        return lease, connect()
    except VendorRefused:
        if not grant["uncounted"]:
            rep = api.report_refusal(provider, kind, grant["in_use"])
            if rep["failed"]:
                out(f"refusal of {provider}/{kind} not recorded (callscribe's Redis unreachable)")
            else:
                verdict = "lowered" if rep["lowered"] else "kept"
                out(f"refusal reported {provider}/{kind} in use {rep['in_use']}: "
                    f"limit {rep['limit_before']} -> {rep['limit_after']} {verdict}")
        api.post("/v1/leases/release", {"lease": lease})
        return None


def refusing_vendor():
    """A vendor connection that is refused, as a vendor at its limit answers."""
    raise VendorRefused("429: too many concurrent streams")


def run_call(api, org, campaign, agent, call_id, replies, out=print):
    """Runs one call end to end; returns its timeline's event kinds."""
    taken = {}  # what must be given back, whatever happens
    try:
        # 1. A call slot: the organisation's and the campaign's caps, waited
        # for up to 30 s, checked every second.
        slot = api.post("/v1/slots", {"org": org, "campaign": campaign, "timeout_ms": 30000, "retry_ms": 1000})["slot"]
        taken["slot"] = slot
        out(f"slot {'uncounted' if slot.get('uncounted') else 'counted'}")

        # 2. Bind it to the call: the call id now names the slot.
        api.post("/v1/slots/bind", {"slot": slot, "call_id": call_id})
        out(f"bound {call_id}")

        # 3. The transcriber: the agent's primary STT provider, a fallback
        # with room, or the primary over the limit (the call must hear).
        stt = api.post(f"/v1/calls/{call_id}/transcriber", {"agent": agent})
        if stt.get("lease"):
            taken["stt"] = stt["lease"]
        flags = " over-limit" if stt.get("over_limit") else (" fallback" if stt.get("fell_back") else "")
        out(f"transcriber {stt['provider']}{flags}")

        # 4. Each reply holds one voice slot only while it speaks.
        for i in range(replies):
            voice = api.post(f"/v1/calls/{call_id}/voice/start", {"agent": agent})
            try:
                time.sleep(0.05)  # ... speak the reply ...
            finally:
                if voice.get("lease"):
                    api.post(f"/v1/calls/{call_id}/voice/done", {"lease": voice["lease"]})
            flags = " over-limit" if voice.get("over_limit") else (" fallback" if voice.get("fell_back") else "")
            out(f"reply {i + 1} {voice['provider']}{flags} waited {voice.get('waited_ms', 0)}ms")

        # 5. A long call refreshes its leases before they expire (every
        # half lease, say); a client that dies lets them lapse.
        if "stt" in taken:
            refreshed = api.post("/v1/leases/refresh", {"leases": [taken["stt"]]})
            out(f"refreshed {len(refreshed['refreshed'])} lost {len(refreshed['lost'])}")
    finally:
        # 6. Hang-up: give back whatever was taken, even after an error.
        if "stt" in taken:
            api.post("/v1/leases/release", {"lease": taken["stt"]})
        if "slot" in taken:
            api.post("/v1/slots/release", {"slot": taken["slot"]})
        out("released")

    events = api.get(f"/v1/calls/{call_id}/timeline")["events"]
    kinds = [e["kind"] for e in events]
    out("timeline " + (" ".join(kinds) if kinds else "(no events: nothing went over a limit)"))
    return kinds


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", required=True, help="the capacity API, e.g. http://127.0.0.1:8080")
    p.add_argument("--token", help="bearer token (an organisation's or an admin's)")
    p.add_argument("--org", required=True)
    p.add_argument("--campaign", default="")
    p.add_argument("--agent", required=True, help="an agent of capacity.agents")
    p.add_argument("--call-id", required=True)
    p.add_argument("--replies", type=int, default=3)
    p.add_argument("--refused", metavar="PROVIDER/KIND",
                   help="after the call, open one more stream of PROVIDER/KIND (kind stt or tts) "
                        "that the vendor refuses, and report the refusal")
    args = p.parse_args(argv)
    refused = None
    if args.refused:
        provider, _, kind = args.refused.rpartition("/")
        if not provider or kind not in ("stt", "tts"):
            p.error("--refused must be PROVIDER/stt or PROVIDER/tts")
        refused = (provider, kind)
    api = Capacity(args.base, args.token)
    try:
        run_call(api, args.org, args.campaign, args.agent, args.call_id, args.replies)
        if refused:
            open_stream(api, refused[0], refused[1], args.call_id + "-refused", refusing_vendor)
    except (APIError, urllib.error.URLError, OSError) as e:
        print(f"live_call: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
