package cli_test

// The peer of BenchmarkThroughput: the pipeline a team would write on River
// instead of adopting callscribe, written as one would for production, so
// that callscribe's ratio to it is the price of callscribe's guarantees and
// nothing else.
//
// Per recording it does the same business work as callscribe against the
// same doubles: hash the audio at ingest, one stt-http/v1 submission with
// the business key as Idempotency-Key (polling when the server answers
// 202), the transcript's confidence check (crm.Validate at the pipeline's
// default minimum), the same rule-based action extraction
// (extract.RuleExtractor) and the same crm-webhook/v1 body
// (connector.WebhookBody), one POST with the set's idempotency key.
//
// Its machinery is the plain River shape, tuned:
//
//   - ingest: the manifest read and each audio file hashed, then one
//     transaction per peerIngestChunk recordings: one INSERT … SELECT FROM
//     unnest … ON CONFLICT DO NOTHING RETURNING id (the business key is
//     unique, so ingesting twice converges) and River's InsertManyFastTx of
//     their transcribe jobs;
//   - transcribe job: read the row, call the vendor (no connection held),
//     then one transaction: the transcript and the delivery row in one
//     statement, and the deliver job by River's InsertTx;
//   - deliver job: read the delivery row, POST it (no connection held),
//     then one statement that marks the delivery and the recording
//     delivered;
//   - as many workers as callscribe's run, split as callscribe splits them
//     (the vendor's: immediate + batch; the CRM's: the dispatcher's), the
//     same FetchCooldown and FetchPollInterval as callscribe's worker, a
//     pgx pool of one connection per worker plus River's own, one
//     keep-alive http.Client with an idle connection per worker and host.
//
// What it does not do is what callscribe exists for: no ledger events, no
// state machine enforced by the database, no shared Retry-After deferral,
// no concurrency windows or vendor slots, no leases, no reconciliation of
// a lost answer (a retry submits again, relying on the vendor's
// Idempotency-Key), no outbox tries recorded before the CRM call, no
// batch lane, no deadlines. A vendor 429 or 5xx is a returned error: River
// retries the job with its own backoff.
//
// It runs as processes, as callscribe's side does: this test binary run
// again with peerRoleEnv set to "ingest" or "worker" (TestMain hands over
// to peerMain) and its settings, JSON, in peerConfigEnv.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/callscribe/callscribe/cmd/callscribe/cli"
	"github.com/callscribe/callscribe/crm"
	"github.com/callscribe/callscribe/crm/connector"
	"github.com/callscribe/callscribe/crm/extract"
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/jobs/stt"
)

const (
	// peerRoleEnv makes this test binary the peer's "ingest" or "worker"
	// process (see TestMain).
	peerRoleEnv = "CALLSCRIBE_BENCH_PEER_ROLE"
	// peerConfigEnv holds the peer process's peerConfig, as JSON.
	peerConfigEnv = "CALLSCRIBE_BENCH_PEER_CONFIG"

	// peerIngestChunk is how many recordings one ingest transaction
	// inserts, as the rows' statement and InsertManyFastTx.
	peerIngestChunk = 1000
	// peerPoolSpare is the connections beyond one per worker: River's
	// producer per queue, its notifier's LISTEN, leader election and
	// maintenance.
	peerPoolSpare = 8
	// peerHTTPTimeout bounds one HTTP exchange with a vendor or the CRM.
	peerHTTPTimeout = 30 * time.Second
	// peerPollDefault is the wait between polls of an asynchronous
	// transcription whose answer carries no Retry-After.
	peerPollDefault = 250 * time.Millisecond

	peerQueueTranscribe = "peer_transcribe"
	peerQueueDeliver    = "peer_deliver"
)

// peerSchema is the peer's tables, in a schema of their own in the bench's
// database (River's tables are migrated beside them).
const peerSchema = `
CREATE SCHEMA peer;
CREATE TABLE peer.recordings (
	id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	tenant_id    text NOT NULL,
	call_id      text NOT NULL,
	audio_path   text NOT NULL,
	audio_sha256 text NOT NULL,
	state        text NOT NULL DEFAULT 'received', -- received, transcribed, delivered, failed
	transcript   text,
	created_at   timestamptz NOT NULL DEFAULT now(),
	updated_at   timestamptz NOT NULL DEFAULT now(),
	UNIQUE (tenant_id, call_id, audio_sha256)
);
CREATE TABLE peer.deliveries (
	id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	recording_id    bigint NOT NULL UNIQUE REFERENCES peer.recordings,
	idempotency_key text NOT NULL UNIQUE,
	body            text NOT NULL, -- the crm-webhook/v1 body, the same bytes on every try
	state           text NOT NULL DEFAULT 'pending', -- pending, delivered, dead
	crm_id          text,
	created_at      timestamptz NOT NULL DEFAULT now(),
	delivered_at    timestamptz
);
CREATE INDEX ON peer.deliveries (state);
`

// peerConfig is what a peer process is given.
type peerConfig struct {
	DatabaseURL string `json:"database_url"`
	// AudioRoot is where the manifest's audio paths are, as callscribe's
	// audio.root.
	AudioRoot string `json:"audio_root"`
	// Manifest is the JSONL manifest the ingest process reads (the one
	// `callscribe ingest --manifest` reads).
	Manifest string `json:"manifest,omitempty"`

	STTURL    string `json:"stt_url"`
	STTAPIKey string `json:"stt_api_key"`
	CRMURL    string `json:"crm_url"`
	CRMToken  string `json:"crm_token"`

	// TranscribeWorkers and DeliverWorkers are the two queues' MaxWorkers.
	TranscribeWorkers int `json:"transcribe_workers"`
	DeliverWorkers    int `json:"deliver_workers"`
}

// peerMain runs the peer process role and returns its exit code. SIGINT
// and SIGTERM stop a worker: River finishes the running jobs.
func peerMain(role string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var cfg peerConfig
	if err := json.Unmarshal([]byte(os.Getenv(peerConfigEnv)), &cfg); err != nil {
		log.Error("peer: reading "+peerConfigEnv, slog.Any("error", err))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch role {
	case "ingest":
		err = peerIngest(ctx, cfg)
	case "worker":
		// BENCH_PEER_CPUPROFILE=FILE: the peer worker's CPU profile, to
		// set beside callscribe's (BENCH_CPUPROFILE); a later run's
		// replaces an earlier one's.
		if path := os.Getenv("BENCH_PEER_CPUPROFILE"); path != "" {
			stopProfile, perr := cli.StartCPUProfile(path)
			if perr != nil {
				log.Error("peer: starting the CPU profile", slog.Any("error", perr))
				return 1
			}
			defer stopProfile()
		}
		err = peerWork(ctx, cfg, log)
	default:
		err = fmt.Errorf("unknown role %q, want ingest or worker", role)
	}
	if err != nil {
		log.Error("peer "+role, slog.Any("error", err))
		return 1
	}
	return 0
}

// peerPool opens the peer's pool of maxConns connections.
func peerPool(ctx context.Context, dbURL string, maxConns int) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, fmt.Errorf("parsing the database URL: %w", err)
	}
	pc.MaxConns = int32(maxConns)
	pc.ConnConfig.RuntimeParams["application_name"] = "peer"
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("connecting to the database: %w", err)
	}
	return pool, nil
}

// peerTranscribeArgs is the transcribe job of one recording.
type peerTranscribeArgs struct {
	RecordingID int64 `json:"recording_id"`
}

func (peerTranscribeArgs) Kind() string { return "peer_transcribe" }

func (peerTranscribeArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: peerQueueTranscribe}
}

// peerDeliverArgs is the deliver job of one recording's action set.
type peerDeliverArgs struct {
	DeliveryID int64 `json:"delivery_id"`
}

func (peerDeliverArgs) Kind() string { return "peer_deliver" }

func (peerDeliverArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: peerQueueDeliver}
}

// peerManifestLine is one line of the manifest (callscribe's format).
type peerManifestLine struct {
	TenantID string `json:"tenant_id"`
	CallID   string `json:"call_id"`
	Audio    string `json:"audio"`
}

// peerIngest takes in every recording of the manifest: each audio file
// hashed for the business key, then peerIngestChunk recordings and their
// transcribe jobs per transaction.
func peerIngest(ctx context.Context, cfg peerConfig) error {
	pool, err := peerPool(ctx, cfg.DatabaseURL, 2)
	if err != nil {
		return err
	}
	defer pool.Close()
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{}) // insert-only
	if err != nil {
		return fmt.Errorf("creating the River client: %w", err)
	}
	data, err := os.ReadFile(cfg.Manifest)
	if err != nil {
		return fmt.Errorf("reading the manifest: %w", err)
	}
	var tenants, calls, paths, sums []string
	flush := func() error {
		if len(tenants) == 0 {
			return nil
		}
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `
				INSERT INTO peer.recordings (tenant_id, call_id, audio_path, audio_sha256)
				SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])
				ON CONFLICT (tenant_id, call_id, audio_sha256) DO NOTHING
				RETURNING id`, tenants, calls, paths, sums)
			if err != nil {
				return fmt.Errorf("inserting recordings: %w", err)
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				return fmt.Errorf("inserting recordings: %w", err)
			}
			if len(ids) == 0 {
				return nil // every one ingested before
			}
			params := make([]river.InsertManyParams, len(ids))
			for i, id := range ids {
				params[i] = river.InsertManyParams{Args: peerTranscribeArgs{RecordingID: id}}
			}
			if _, err := client.InsertManyFastTx(ctx, tx, params); err != nil {
				return fmt.Errorf("inserting transcribe jobs: %w", err)
			}
			return nil
		})
		tenants, calls, paths, sums = tenants[:0], calls[:0], paths[:0], sums[:0]
		return err
	}
	for n, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var m peerManifestLine
		if err := json.Unmarshal(line, &m); err != nil {
			return fmt.Errorf("manifest line %d: %w", n+1, err)
		}
		path := filepath.Join(cfg.AudioRoot, filepath.FromSlash(m.Audio))
		audio, err := os.ReadFile(path) //nolint:gosec // the manifest names files under the audio root
		if err != nil {
			return fmt.Errorf("manifest line %d: %w", n+1, err)
		}
		sum := sha256.Sum256(audio)
		tenants, calls, paths, sums = append(tenants, m.TenantID), append(calls, m.CallID), append(paths, path), append(sums, hex.EncodeToString(sum[:]))
		if len(tenants) == peerIngestChunk {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// peerWork runs the two queues' workers until ctx ends.
func peerWork(ctx context.Context, cfg peerConfig, log *slog.Logger) error {
	workers := cfg.TranscribeWorkers + cfg.DeliverWorkers
	pool, err := peerPool(ctx, cfg.DatabaseURL, workers+peerPoolSpare)
	if err != nil {
		return err
	}
	defer pool.Close()
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConns = 2 * workers
	transport.MaxIdleConnsPerHost = workers
	h := &peerHTTP{
		cfg:  cfg,
		pool: pool,
		http: &http.Client{
			Transport: transport,
			Timeout:   peerHTTPTimeout,
			// Never follow a redirect: a redirected POST loses its body
			// or carries the credentials elsewhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	ws := river.NewWorkers()
	river.AddWorker(ws, &peerTranscribeWorker{h: h})
	river.AddWorker(ws, &peerDeliverWorker{h: h})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues: map[string]river.QueueConfig{
			peerQueueTranscribe: {MaxWorkers: cfg.TranscribeWorkers},
			peerQueueDeliver:    {MaxWorkers: cfg.DeliverWorkers},
		},
		Workers: ws,
		Logger:  log,
		// As callscribe's worker: a queue with free workers fetches again
		// this soon, and River's notifications on insert are backed by a
		// fetch at least this often.
		FetchCooldown:     jobs.FetchCooldownDefault,
		FetchPollInterval: 100 * time.Millisecond,
		JobTimeout:        time.Minute,
	})
	if err != nil {
		return fmt.Errorf("creating the River client: %w", err)
	}
	if err := client.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("starting workers: %w", err)
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		return fmt.Errorf("stopping workers: %w", err)
	}
	return nil
}

// peerHTTP is what both workers share: the pool, the HTTP client and the
// doubles' addresses and credentials.
type peerHTTP struct {
	cfg  peerConfig
	pool *pgxpool.Pool
	http *http.Client
}

// errPeerPermanent marks an answer that will never succeed as sent: the
// job is cancelled and its row marked, instead of retried.
var errPeerPermanent = errors.New("permanent")

// do sends one request with a JSON body (nil: none) and returns the
// status, the body (at most 1 MiB) and the Retry-After header.
func (h *peerHTTP) do(ctx context.Context, method, u, bearer string, header http.Header, body []byte) (int, []byte, string, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, "", err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	if body != nil {
		req.Header.Set("Content-Type", "application/json; charset=utf-8")
	}
	resp, err := h.http.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, "", fmt.Errorf("reading the answer of %s %s: %w", method, req.URL.Path, err)
	}
	return resp.StatusCode, data, resp.Header.Get("Retry-After"), nil
}

// peerTranscription is the part of an stt-http/v1 transcription the peer
// reads.
type peerTranscription struct {
	ID         string  `json:"id"`
	Status     string  `json:"status"`
	Text       string  `json:"text"`
	Language   string  `json:"language"`
	Confidence float64 `json:"confidence"`
}

// classify turns an stt-http/v1 or crm-webhook/v1 status into an error:
// nil for 2xx, errPeerPermanent for 3xx and 4xx but 429, a plain error
// (River retries) for the rest.
func classify(what string, status int, body []byte) error {
	switch {
	case status >= 200 && status < 300:
		return nil
	case status == http.StatusTooManyRequests || status >= 500:
		return fmt.Errorf("%s: %d: %.200s", what, status, body)
	default:
		return fmt.Errorf("%s: %d: %.200s: %w", what, status, body, errPeerPermanent)
	}
}

// transcribe submits one recording and, when the server answers 202,
// polls it until it is completed or failed.
func (h *peerHTTP) transcribe(ctx context.Context, tenant, callID, path, sum string) (peerTranscription, error) {
	body, err := json.Marshal(map[string]any{
		"audio_url":    (&url.URL{Scheme: "file", Path: path}).String(),
		"audio_sha256": sum,
		"model":        stt.GenericHTTPModelDefault,
		"tenant_id":    tenant,
		"metadata":     map[string]string{"call_id": callID},
	})
	if err != nil {
		return peerTranscription{}, err
	}
	key := tenant + ":" + callID + ":" + sum
	status, data, retryAfter, err := h.do(ctx, http.MethodPost, h.cfg.STTURL+"/v1/transcriptions", h.cfg.STTAPIKey,
		http.Header{"Idempotency-Key": {key}}, body)
	for {
		if err != nil {
			return peerTranscription{}, fmt.Errorf("transcribing %s: %w", callID, err)
		}
		if err := classify("transcribing "+callID, status, data); err != nil {
			return peerTranscription{}, err
		}
		var t peerTranscription
		if err := json.Unmarshal(data, &t); err != nil {
			return peerTranscription{}, fmt.Errorf("transcribing %s: the answer is not a transcription: %w", callID, err)
		}
		switch t.Status {
		case "completed":
			return t, nil
		case "failed":
			return peerTranscription{}, fmt.Errorf("transcribing %s: the vendor failed it: %w", callID, errPeerPermanent)
		}
		wait := peerPollDefault
		if s, err := strconv.Atoi(retryAfter); err == nil && s >= 0 {
			wait = time.Duration(s) * time.Second
		}
		select {
		case <-ctx.Done():
			return peerTranscription{}, ctx.Err()
		case <-time.After(wait):
		}
		status, data, retryAfter, err = h.do(ctx, http.MethodGet, h.cfg.STTURL+"/v1/transcriptions/"+url.PathEscape(t.ID), h.cfg.STTAPIKey, nil, nil)
	}
}

// peerTranscribeWorker transcribes one recording, extracts its actions
// and queues their delivery.
type peerTranscribeWorker struct {
	river.WorkerDefaults[peerTranscribeArgs]
	h *peerHTTP
}

func (w *peerTranscribeWorker) Work(ctx context.Context, job *river.Job[peerTranscribeArgs]) error {
	id := job.Args.RecordingID
	var tenant, callID, path, sum, state string
	if err := w.h.pool.QueryRow(ctx, `SELECT tenant_id, call_id, audio_path, audio_sha256, state FROM peer.recordings WHERE id = $1`, id).
		Scan(&tenant, &callID, &path, &sum, &state); err != nil {
		return fmt.Errorf("reading recording %d: %w", id, err)
	}
	if state != "received" {
		return nil // a retry of a job whose transaction committed
	}
	t, err := w.h.transcribe(ctx, tenant, callID, path, sum)
	if err == nil {
		err = crm.Validate(crm.Transcript{Text: t.Text, Language: t.Language, Confidence: t.Confidence},
			crm.Rules{MinConfidence: jobs.MinConfidenceDefault})
		if err != nil {
			err = fmt.Errorf("%w: %w", err, errPeerPermanent)
		}
	}
	if errors.Is(err, errPeerPermanent) {
		return w.fail(ctx, id, err)
	}
	if err != nil {
		return err
	}
	actions, err := extract.RuleExtractor{}.Extract(ctx, crm.ExtractInput{TenantID: tenant, CallID: callID, Text: t.Text})
	if err != nil {
		return fmt.Errorf("extracting the actions of %s: %w", callID, err)
	}
	set := crm.ActionSet{TenantID: tenant, CallID: callID, ActionVersion: 1, RecordingSHA256: sum,
		CommittedAt: time.Now().UTC(), Actions: actions}
	body, err := connector.WebhookBody(set)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, w.h.pool, func(tx pgx.Tx) error {
		var deliveryID int64
		err := tx.QueryRow(ctx, `
			WITH r AS (
				UPDATE peer.recordings SET state = 'transcribed', transcript = $2, updated_at = now()
				WHERE id = $1 AND state = 'received' RETURNING id
			)
			INSERT INTO peer.deliveries (recording_id, idempotency_key, body) SELECT id, $3, $4 FROM r RETURNING id`,
			id, t.Text, set.IdempotencyKey(), string(body)).Scan(&deliveryID)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // another run of this job committed first
		}
		if err != nil {
			return fmt.Errorf("storing the transcript of %s: %w", callID, err)
		}
		if _, err := river.ClientFromContext[pgx.Tx](ctx).InsertTx(ctx, tx, peerDeliverArgs{DeliveryID: deliveryID}, nil); err != nil {
			return fmt.Errorf("queueing the delivery of %s: %w", callID, err)
		}
		return nil
	})
}

// fail marks a recording that will never succeed as sent, and cancels
// its job.
func (w *peerTranscribeWorker) fail(ctx context.Context, id int64, cause error) error {
	if _, err := w.h.pool.Exec(ctx, `UPDATE peer.recordings SET state = 'failed', updated_at = now() WHERE id = $1 AND state = 'received'`, id); err != nil {
		return fmt.Errorf("marking recording %d failed: %w", id, err)
	}
	return river.JobCancel(cause)
}

// peerDeliverWorker delivers one action set to the CRM.
type peerDeliverWorker struct {
	river.WorkerDefaults[peerDeliverArgs]
	h *peerHTTP
}

func (w *peerDeliverWorker) Work(ctx context.Context, job *river.Job[peerDeliverArgs]) error {
	id := job.Args.DeliveryID
	var key, body, state string
	if err := w.h.pool.QueryRow(ctx, `SELECT idempotency_key, body, state FROM peer.deliveries WHERE id = $1`, id).Scan(&key, &body, &state); err != nil {
		return fmt.Errorf("reading delivery %d: %w", id, err)
	}
	if state != "pending" {
		return nil // a retry of a job whose statement committed
	}
	status, data, _, err := w.h.do(ctx, http.MethodPost, w.h.cfg.CRMURL+"/v1/action-sets", w.h.cfg.CRMToken,
		http.Header{"Idempotency-Key": {key}, "X-Delivery-Attempt": {strconv.Itoa(job.Attempt)}}, []byte(body))
	if err != nil {
		return fmt.Errorf("delivering %s: %w", key, err)
	}
	if err := classify("delivering "+key, status, data); err != nil {
		if errors.Is(err, errPeerPermanent) {
			if _, err := w.h.pool.Exec(ctx, `UPDATE peer.deliveries SET state = 'dead' WHERE id = $1 AND state = 'pending'`, id); err != nil {
				return fmt.Errorf("marking delivery %d dead: %w", id, err)
			}
			return river.JobCancel(err)
		}
		return err
	}
	var applied struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(data, &applied); err != nil || applied.ID == "" {
		return fmt.Errorf("delivering %s: %d without a JSON id", key, status) // the retry gets 200 if it was applied
	}
	if _, err := w.h.pool.Exec(ctx, `
		WITH d AS (
			UPDATE peer.deliveries SET state = 'delivered', crm_id = $2, delivered_at = now()
			WHERE id = $1 AND state = 'pending' RETURNING recording_id
		)
		UPDATE peer.recordings r SET state = 'delivered', updated_at = now() FROM d WHERE r.id = d.recording_id`,
		id, applied.ID); err != nil {
		return fmt.Errorf("marking %s delivered: %w", key, err)
	}
	return nil
}
