#!/bin/sh
# Regenerates the speech recordings and manifest.jsonl in this folder.
# They were generated once and committed; tests only read them. See README.md.
#
# Needs espeak-ng and sox (Debian: apt-get install espeak-ng sox).
set -eu
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

: > manifest.jsonl
# tenant|call|lane|started_at|text (no double quotes or backslashes in text)
while IFS='|' read -r tenant call lane started text; do
	[ -n "$tenant" ] || continue
	mkdir -p "$tenant"
	espeak-ng -v en-us -s 160 -w "$tmp/raw.wav" "$text"
	sox -R "$tmp/raw.wav" -r 16000 -c 1 -b 16 -e signed-integer "$tenant/$call.wav"
	printf '{"tenant_id":"%s","call_id":"%s","audio":"%s/%s.wav","lane":"%s","language":"en","started_at":"%s","expected_text":"%s"}\n' \
		"$tenant" "$call" "$tenant" "$call" "$lane" "$started" "$text" >> manifest.jsonl
done <<'CALLS'
northline|call-1001|batch|2026-11-23T09:12:40-06:00|Thanks for the call. I'll send you the rate sheet for Chicago to Dallas and Memphis to Atlanta by Friday.
northline|call-1002|immediate|2026-11-23T10:47:03-06:00|Please move the pickup for shipment PO 4471 to Tuesday between 8 and 10 am.
northline|call-1003|batch|2026-11-24T14:05:18-06:00|Good talking today. Let's talk again next Wednesday about the Milwaukee volume.
northline|call-1004|immediate|2026-11-24T16:31:55-06:00|The driver checked in at the dock in Joliet and the trailer is loading now.
harbor|call-2001|immediate|2026-11-23T08:20:11-08:00|We need to move the pickup for shipment PO 5820 to Monday between 1 and 3 pm.
harbor|call-2002|batch|2026-11-23T13:44:29-08:00|I'll get you the rate sheet for Oakland to Phoenix and Stockton to Reno by Wednesday.
harbor|call-2003|batch|2026-11-24T11:02:47-08:00|Your container cleared customs at the Port of Oakland this morning and is on a chassis.
harbor|call-2004|immediate|2026-11-25T15:16:08-08:00|The reefer schedule is almost final, so let's talk again next Tuesday.
ridgeway|call-3001|batch|2026-11-23T09:55:36-05:00|I'll send you the rate sheet for Atlanta to Charlotte by Monday, and let's talk again next Thursday.
ridgeway|call-3002|immediate|2026-11-24T10:08:52-05:00|Please move the pickup for shipment PO 3308 to Wednesday between 7 and 9 am.
ridgeway|call-3003|batch|2026-11-25T14:39:14-05:00|Thanks, the proof of delivery is uploaded and the invoice went out this afternoon.
ridgeway|call-3004|immediate|2026-11-30T16:22:45-05:00|The load to Nashville delivered on time, and there were no detention charges.
CALLS
