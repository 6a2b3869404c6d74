// Package riverwake makes River jobs that sleep in a concurrency window's
// line available at once, when the window calls them to a freed slot. The
// speech pipeline (jobs) and the CRM dispatcher (outbox) share it.
package riverwake

import (
	"context"
	"errors"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// Wake makes each job of jobIDs available now, through the River client of
// ctx (a worker's context). A job that is running or gone is left alone; a
// wake that fails is logged at debug level on log and only means the job
// comes back at its own time. Without a client in ctx it does nothing.
func Wake(ctx context.Context, log *slog.Logger, jobIDs []int64) {
	if len(jobIDs) == 0 {
		return
	}
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return
	}
	for _, id := range jobIDs {
		if _, err := client.JobRetry(context.WithoutCancel(ctx), id); err != nil && !errors.Is(err, river.ErrNotFound) {
			log.Debug("waking a job called to a free window slot", slog.Int64("job", id), slog.Any("error", err))
		}
	}
}
