package outbox

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/crm/connector"
	"github.com/callscribe/callscribe/internal/pgtime"
	"github.com/callscribe/callscribe/ledger"
	"github.com/callscribe/callscribe/outbox/internal/dbsqlc"
)

// subject is what one delivery try (Outbox.try) works on: an outbox row,
// or a replay delivery. Both take the same admission (the scope's
// deferral, its window, the admission's age), the same retries and the
// same deadline; they differ in where a try and its outcome are recorded
// (store), the window holder and lane, and the target.
type subject struct {
	// Row: the fields a try reads (Scope, Target, State, NotBefore,
	// Deadline, LastClass, CreatedAt, TenantID).
	Row
	set dbsqlc.ActionSet
	// holder is the window holder: a retried try is granted its own slot
	// again rather than a second one.
	holder string
	lane   capacity.Lane
	// target delivers the set; nil: none configured, and noTarget says
	// why (the delivery goes dead).
	target   connector.Target
	noTarget string
	// logAttr names the delivery in logs and errors.
	logAttr slog.Attr
	// log is the try's logger: the delivery (logAttr) with its
	// recording_id, tenant, call_id, scope and River's job_id (withLog).
	log   *slog.Logger
	store tryStore
	// prompt: a try right after the row's commit, outside River
	// (prompter): it goes on only while the scope is plainly open, and
	// leaves every wait to a River job.
	prompt bool
}

// logger is s.log, or, before a try set it, base with the delivery's name.
func (s *subject) logger(base *slog.Logger) *slog.Logger {
	if s.log != nil {
		return s.log
	}
	return base.With(s.logAttr, slog.String("scope", s.Scope))
}

// withLog sets s.log from base for a try made by job jobID, so that a
// recording can be followed through the log by its id as through `jobs
// show`.
func (s *subject) withLog(base *slog.Logger, jobID int64) {
	job := slog.Int64("job_id", jobID)
	if s.prompt {
		job = slog.Bool("prompt", true) // tried right after its commit, by no River job
	}
	s.log = base.With(s.logAttr, slog.String("recording_id", s.set.RecordingID.String()), slog.String("tenant", s.TenantID),
		slog.String("call_id", s.CallID), slog.String("scope", s.Scope), job)
}

// tryStore records a subject's tries and outcomes.
type tryStore interface {
	// ready is how long the subject must wait before its next send (a
	// replay run's rate ceiling); 0: send now, the wait consumed.
	ready(ctx context.Context) (time.Duration, error)
	// try counts one more try, durable before the CRM is called, made on
	// admission adm; it returns the try's number (from 1). ErrNotFound:
	// settled meanwhile.
	try(ctx context.Context, now time.Time, adm ledger.Admission) (int, error)
	// readmit records the recheck of try attempt's aged admission: adm
	// let it go (it is sent on adm) or refused it (it is withdrawn,
	// unsent).
	readmit(ctx context.Context, attempt int, adm ledger.Admission) error
	// settle records the try's outcome and the delivery's new state;
	// rowClass ("": the answer's class) is the delivery's last class.
	// Settled meanwhile is not an error.
	settle(ctx context.Context, state, rowClass string, res connector.Result, notBefore *time.Time, reason string) error
	// expire moves the delivery, whose deadline has passed at now, to dead.
	expire(ctx context.Context, now time.Time) error
	// tooLate records answer res and the delivery's death: its next try
	// could start no sooner than next, after its deadline.
	tooLate(ctx context.Context, res connector.Result, next time.Time, log *slog.Logger) error
}

// rowStore records the tries of an outbox row in outbox and
// outbox_events.
type rowStore struct {
	o *Outbox
	s *subject
}

func (rowStore) ready(context.Context) (time.Duration, error) { return 0, nil }

func (st *rowStore) try(ctx context.Context, now time.Time, _ ledger.Admission) (int, error) {
	// Durable before the CRM is called: Commit returns once the try's
	// group has committed.
	var tries int32
	err := st.o.commit.CommitQueued(ctx, func(q *ledger.Queue) ledger.FinishFunc {
		var qerr error
		// Merged with the group's other tries: one statement.
		ledger.QueueMerged(q, tryMergeKey{}, st.s.ID, dbsqlc.OutboxTryParams{ID: st.s.ID, At: pgtime.Write(now)},
			func(n int32, err error) { tries, qerr = n, err }, dbsqlc.QueueOutboxTry, dbsqlc.QueueOutboxTryMany)
		return func(_ context.Context, tx pgx.Tx, batchErr error) error {
			if qerr == nil && batchErr != nil {
				qerr = batchErr // the statement's answer never came
			}
			return ledger.KeptUsable(tx, qerr)
		}
	}, nil)
	if err != nil {
		return 0, translate(err)
	}
	return int(tries), nil
}

type tryMergeKey struct{}

func (rowStore) readmit(context.Context, int, ledger.Admission) error { return nil }

func (st *rowStore) settle(ctx context.Context, state, rowClass string, res connector.Result, notBefore *time.Time, reason string) error {
	return st.o.settleAs(ctx, st.s.Row, state, rowClass, res, notBefore, reason)
}

func (st *rowStore) expire(ctx context.Context, now time.Time) error {
	_, err := st.o.expire(ctx, st.s.Row, now, "")
	return err
}

func (st *rowStore) tooLate(ctx context.Context, res connector.Result, next time.Time, log *slog.Logger) error {
	return st.o.settleTooLate(ctx, st.s.Row, res, next, log)
}
