-- The exact accounting of submissions against cooldowns: every
-- submission since a time, with the offer that shows it ignored a
-- cooldown its admission knew of and the offer that shows it was in
-- flight when a later cooldown was announced. Ledger.SubmissionAccounting
-- is its one user; no other definition of either exists.

-- name: SubmissionChecks :many
-- A submission is an event that records its admission (admitted_seq,
-- admitted_at: the scope's sequence number and the database's clock its
-- admission read) and whether it was the probe; the event after it may record the instant the request
-- was sent (sent_at), a later admission read that let it go (admitted_seq,
-- admitted_at again) or that it was withdrawn unsent (withdrawn).
--   ignored: an offer numbered up to admitted_seq had a deadline after
--     admitted_at (the admission itself was wrong);
--   in flight: an offer numbered after admitted_seq was recorded before
--     sent_at, with a deadline after sent_at.
-- Enforced submissions are judged by the offers that moved the deadline,
-- observe-only ones (what enforcement would have held back) by all.
WITH subs AS (
    SELECT e.recording_id, e.seq, r.tenant_id, r.call_id,
           coalesce(e.detail->>'scope', '')::text AS scope,
           coalesce((e.detail->>'probe')::boolean, false)::boolean AS probe,
           coalesce((e.detail->>'observe')::boolean, false)::boolean AS observe,
           coalesce((n.detail->>'admitted_seq')::bigint, (e.detail->>'admitted_seq')::bigint)::bigint AS admitted_seq,
           coalesce((n.detail->>'admitted_at')::timestamptz, (e.detail->>'admitted_at')::timestamptz)::timestamptz AS admitted_at,
           (n.detail->>'sent_at')::timestamptz AS sent_at,
           coalesce(n.response_class = 'rate_limited', false)::boolean AS throttled
    FROM recording_events e
    JOIN recordings r ON r.id = e.recording_id
    LEFT JOIN recording_events n ON n.recording_id = e.recording_id AND n.seq = e.seq + 1
    WHERE (sqlc.narg(tenants)::text[] IS NULL OR r.tenant_id = ANY (sqlc.narg(tenants)::text[]))
      AND e.at >= @since::timestamptz
      AND e.detail->>'admitted_seq' IS NOT NULL AND e.detail->>'probe' IS NOT NULL
      AND NOT coalesce((n.detail->>'withdrawn')::boolean, false)
)
SELECT s.recording_id, s.seq, s.tenant_id, s.call_id, s.scope, s.probe, s.observe, s.admitted_seq, s.admitted_at,
       coalesce(s.sent_at, 'epoch')::timestamptz AS sent_at, s.throttled,
       coalesce(k.seq, 0)::bigint AS ignored_seq, coalesce(k.offered_not_before, 'epoch')::timestamptz AS ignored_not_before,
       coalesce(f.seq, 0)::bigint AS in_flight_seq, coalesce(f.recorded_at, 'epoch')::timestamptz AS in_flight_recorded_at
FROM subs s
LEFT JOIN LATERAL (
    SELECT x.seq, x.offered_not_before FROM scope_deferral_extensions x
    WHERE x.scope = s.scope AND x.seq <= s.admitted_seq AND x.offered_not_before > s.admitted_at
      AND (s.observe OR NOT x.observe_only)
    ORDER BY x.seq DESC LIMIT 1
) k ON true
LEFT JOIN LATERAL (
    SELECT x.seq, x.recorded_at FROM scope_deferral_extensions x
    WHERE x.scope = s.scope AND x.seq > s.admitted_seq
      AND x.recorded_at < coalesce(s.sent_at, s.admitted_at)
      AND x.offered_not_before > coalesce(s.sent_at, s.admitted_at)
      AND (s.observe OR NOT x.observe_only)
    ORDER BY x.seq LIMIT 1
) f ON true
ORDER BY s.admitted_at, s.recording_id, s.seq;

-- name: SendChecks :many
-- SubmissionChecks' exact rule for sends recorded outside the ledger (replay
-- deliveries' tries), all of one enforced scope: for each send i (1-based) of
-- the arrays (admitted_seq, admitted_at, sent_at), whether an offer it knew
-- of at admission deferred the scope past its admission (ignored), and
-- whether an offer recorded after its admission and before it was sent
-- covered its sending (in flight).
SELECT t.i::bigint AS i,
       EXISTS (SELECT 1 FROM scope_deferral_extensions x
               WHERE x.scope = @scope AND x.seq <= (@admitted_seqs::bigint[])[t.i]
                 AND x.offered_not_before > (@admitted_ats::timestamptz[])[t.i]
                 AND NOT x.observe_only)::boolean AS ignored,
       EXISTS (SELECT 1 FROM scope_deferral_extensions x
               WHERE x.scope = @scope AND x.seq > (@admitted_seqs::bigint[])[t.i]
                 AND x.recorded_at < (@sent_ats::timestamptz[])[t.i]
                 AND x.offered_not_before > (@sent_ats::timestamptz[])[t.i]
                 AND NOT x.observe_only)::boolean AS in_flight
FROM generate_subscripts(@admitted_seqs::bigint[], 1) AS t(i)
ORDER BY t.i;
