package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/callscribe/callscribe/crm"
	"github.com/callscribe/callscribe/crm/connector"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/ledger/retryafter"
)

// Queue is the River queue of CRM deliveries.
const Queue = "crm"

// Defaults of Config.
const (
	MaxAttemptsDefault = 25
	WorkersDefault     = 10
)

// CounterDuplicateKeyConflicts counts commits that met an action set another
// worker had already committed (and converged on it).
const CounterDuplicateKeyConflicts = "duplicate_key_conflicts"

// Destination is where a tenant's action sets are delivered.
type Destination struct {
	// Name of the target, stored on the outbox row (for example "webhook").
	Name string
	// Scope is the throttling scope of the tenant's CRM integration: a CRM
	// 429 pauses deliveries to it, not the pipeline.
	Scope  string
	Target connector.Target
}

// Config configures the outbox.
type Config struct {
	// Destinations by tenant id. A tenant without one gets its action sets
	// committed with no delivery.
	Destinations map[string]Destination
	// MaxAttempts: tries of one delivery before it is dead. Default 25.
	MaxAttempts int
	// Workers: River MaxWorkers of the crm queue. Default 10.
	Workers int
	// ProbeTimeout, ProbeWait: as for speech vendors (ledger.ScopeAdmit).
	ProbeTimeout, ProbeWait time.Duration
	// RetryAfter turns the CRM's timing signals into deadlines.
	RetryAfter retryafter.Policy
	Clock      ledger.Clock
	Logger     *slog.Logger
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.MaxAttempts == 0 {
		c.MaxAttempts = MaxAttemptsDefault
	}
	if c.Workers == 0 {
		c.Workers = WorkersDefault
	}
	if c.ProbeTimeout == 0 {
		c.ProbeTimeout = ledger.ProbeTimeoutDefault
	}
	if c.ProbeWait == 0 {
		c.ProbeWait = time.Second
	}
	if c.Clock == nil {
		c.Clock = ledger.SystemClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.RetryAfter.Clock == nil {
		c.RetryAfter.Clock = c.Clock
	}
	c.RetryAfter = c.RetryAfter.WithDefaults()
	return c
}

// Outbox commits action sets and delivers them.
type Outbox struct {
	cfg    Config
	pool   *pgxpool.Pool
	ledger *ledger.Ledger
	client *river.Client[pgx.Tx]
}

// New returns an Outbox. SetClient must be called before Commit.
func New(cfg Config, pool *pgxpool.Pool, l *ledger.Ledger) *Outbox {
	return &Outbox{cfg: cfg.WithDefaults(), pool: pool, ledger: l}
}

// SetClient gives the outbox the River client it inserts deliveries with.
func (o *Outbox) SetClient(c *river.Client[pgx.Tx]) { o.client = c }

// Config returns the configuration, defaults applied.
func (o *Outbox) Config() Config { return o.cfg }

// AddWorkers registers the dispatcher.
func (o *Outbox) AddWorkers(w *river.Workers) { river.AddWorker(w, &deliverWorker{o: o}) }

// DeliverArgs delivers one outbox row.
type DeliverArgs struct {
	OutboxID int64 `json:"outbox_id"`
}

// Kind is the River job kind.
func (DeliverArgs) Kind() string { return "crm_deliver" }

// InsertOpts: one active delivery job per outbox row, on the crm queue.
func (DeliverArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: 25, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
		rivertype.JobStateRetryable, rivertype.JobStateScheduled,
	}}}
}

// ActionSet is a committed action set as stored.
type ActionSet struct {
	ID          int64
	RecordingID uuid.UUID
	crm.ActionSet
}

// CommitResult says what Commit did.
type CommitResult struct {
	Set ActionSet
	// Duplicate: another worker had committed this version first; Set is
	// theirs and nothing was written.
	Duplicate bool
	OutboxIDs []int64
}

// Commit writes, in one transaction, the action set (unique on tenant,
// call, version), its outbox row, the River job that delivers it, and the
// recording's validated -> committed transition with its event. A second
// worker reaching the same commit meets the uniqueness conflict, counts it
// (duplicate_key_conflicts) and converges on the committed row.
func (o *Outbox) Commit(ctx context.Context, rec ledger.Recording, actions []crm.Action) (CommitResult, error) {
	var res CommitResult
	now := o.cfg.Clock.Now().UTC().Truncate(time.Microsecond)
	var version int
	if err := o.pool.QueryRow(ctx, qActionSetVersionNext, rec.TenantID, rec.CallID, rec.ID).Scan(&version); err != nil {
		return res, fmt.Errorf("numbering the action set of %s: %w", rec.CallID, err)
	}
	set := crm.ActionSet{TenantID: rec.TenantID, CallID: rec.CallID, ActionVersion: version, RecordingSHA256: rec.AudioSHA256,
		CommittedAt: now, Actions: actions}
	dest, hasDest := o.cfg.Destinations[rec.TenantID]
	conflict := false
	err := pgx.BeginFunc(ctx, o.pool, func(tx pgx.Tx) error {
		body, err := json.Marshal(actions)
		if err != nil {
			return err
		}
		var id int64
		err = tx.QueryRow(ctx, qActionSetInsert, rec.ID, rec.TenantID, rec.CallID, version, rec.AudioSHA256, body, now).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			conflict = true
			return errDuplicate
		}
		if err != nil {
			return fmt.Errorf("storing action set: %w", err)
		}
		res.Set = ActionSet{ID: id, RecordingID: rec.ID, ActionSet: set}
		if hasDest {
			var oid int64
			if err := tx.QueryRow(ctx, qOutboxInsert, id, dest.Name, dest.Scope, set.IdempotencyKey(), now).Scan(&oid); err != nil {
				return fmt.Errorf("storing outbox row: %w", err)
			}
			if _, err := o.client.InsertTx(ctx, tx, DeliverArgs{OutboxID: oid}, nil); err != nil {
				return fmt.Errorf("enqueueing delivery: %w", err)
			}
			res.OutboxIDs = append(res.OutboxIDs, oid)
		}
		_, err = o.ledger.TransitionTx(ctx, tx, ledger.Transition{RecordingID: rec.ID, From: ledger.StateValidated, To: ledger.StateCommitted,
			Reason: fmt.Sprintf("action set v%d committed (%d actions)", version, len(actions)),
			Detail: map[string]any{"action_version": version, "action_set_id": id}})
		return err
	})
	if conflict {
		if _, err := o.pool.Exec(ctx, qCounterAdd, CounterDuplicateKeyConflicts, 1); err != nil {
			return res, err
		}
		o.cfg.Logger.Info("action set already committed by another worker; converging", slog.String("call", rec.CallID), slog.Int("version", version))
		existing, err := o.ActionSetByVersion(ctx, rec.TenantID, rec.CallID, version)
		if err != nil {
			return res, err
		}
		return CommitResult{Set: existing, Duplicate: true}, nil
	}
	return res, err
}

var errDuplicate = errors.New("action set already committed")

// ActionSetByVersion reads one committed action set.
func (o *Outbox) ActionSetByVersion(ctx context.Context, tenantID, callID string, version int) (ActionSet, error) {
	return scanActionSet(o.pool.QueryRow(ctx, qActionSetGetByVersion, tenantID, callID, version))
}

func (o *Outbox) actionSet(ctx context.Context, id int64) (ActionSet, error) {
	return scanActionSet(o.pool.QueryRow(ctx, qActionSetGet, id))
}

func scanActionSet(row pgx.Row) (ActionSet, error) {
	var s ActionSet
	var body []byte
	if err := row.Scan(&s.ID, &s.RecordingID, &s.TenantID, &s.CallID, &s.ActionVersion, &s.RecordingSHA256, &body, &s.CommittedAt); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return s, ledger.ErrNotFound
		}
		return s, err
	}
	s.CommittedAt = s.CommittedAt.UTC()
	return s, json.Unmarshal(body, &s.Actions)
}

// Counter reads an operator counter such as CounterDuplicateKeyConflicts.
func (o *Outbox) Counter(ctx context.Context, name string) (int64, error) {
	var n int64
	err := o.pool.QueryRow(ctx, qCounterGet, name).Scan(&n)
	return n, err
}

// Counters lists every operator counter and gauge by name.
func (o *Outbox) Counters(ctx context.Context) (map[string]int64, error) {
	rows, err := o.pool.Query(ctx, qCounterList)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	var name string
	var v int64
	_, err = pgx.ForEachRow(rows, []any{&name, &v}, func() error { out[name] = v; return nil })
	return out, err
}
