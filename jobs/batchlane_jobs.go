package jobs

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/callscribe/callscribe/internal/riverunique"
	"github.com/callscribe/callscribe/jobs/stt"
)

// The batch lane's defaults (BatchConfig).
const (
	BatchMaxItemsDefault        = 100
	BatchMaxAudioSecondsDefault = 10 * 3600
	BatchMaxWaitDefault         = 30 * time.Second
	BatchFormEveryDefault       = time.Second
	BatchPollIntervalDefault    = 2 * time.Second
)

// BatchConfig configures the batch lane's manifests: batch recordings of a
// tenant whose vendor has a batch contract (generic-http) are sent in
// groups, one request per manifest, instead of one request each.
type BatchConfig struct {
	// Manifests turns them on. Default false: the batch lane submits
	// every recording alone.
	Manifests bool `yaml:"manifests"`
	// MaxItems bounds a manifest's items (at most stt.MaxBatchItems).
	// Default 100.
	MaxItems int `yaml:"max_items"`
	// MaxAudioSeconds bounds a manifest's total audio. Default 36000.
	MaxAudioSeconds float64 `yaml:"max_audio_seconds"`
	// MaxWait: a manifest not yet full is sent once its oldest recording
	// has waited this long. Default 30s.
	MaxWait time.Duration `yaml:"max_wait"`
	// FormEvery is how often the lane looks for recordings to group.
	// Default 1s.
	FormEvery time.Duration `yaml:"form_every"`
	// PollInterval between polls of an accepted manifest when the vendor
	// gives no Retry-After (batch work is not urgent: fewer polls).
	// Default 2s.
	PollInterval time.Duration `yaml:"poll_interval"`
}

// FormManifestsArgs groups waiting batch recordings into manifests; it
// runs periodically (BatchConfig.FormEvery).
type FormManifestsArgs struct{}

// Kind is the River job kind.
func (FormManifestsArgs) Kind() string { return "batch_form" }

// InsertOpts: on the batch queue, one at a time.
func (FormManifestsArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueBatch, UniqueOpts: riverunique.ByArgs()}
}

// ManifestArgs drives one manifest: its submission, its polls, its items'
// outcomes.
type ManifestArgs struct {
	ManifestID uuid.UUID `json:"manifest_id" river:"unique"`
}

// Kind is the River job kind.
func (ManifestArgs) Kind() string { return "batch_manifest" }

// InsertOpts: on the batch queue, one active job per manifest.
func (ManifestArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueBatch, MaxAttempts: 25, UniqueOpts: riverunique.ByArgs(rivertype.JobStateRetryable)}
}

type formWorker struct {
	river.WorkerDefaults[FormManifestsArgs]
	p *Pipeline
}

// Timeout bounds a run of the forming (FormManifestsTimeout).
func (w *formWorker) Timeout(*river.Job[FormManifestsArgs]) time.Duration {
	return w.p.jobTimeout(FormManifestsTimeout)
}

func (w *formWorker) Work(ctx context.Context, _ *river.Job[FormManifestsArgs]) error {
	_, err := w.p.FormManifests(ctx)
	return err
}

type manifestWorker struct {
	river.WorkerDefaults[ManifestArgs]
	p *Pipeline
}

// Timeout bounds one step of a manifest (ManifestTimeout).
func (w *manifestWorker) Timeout(*river.Job[ManifestArgs]) time.Duration {
	return w.p.jobTimeout(ManifestTimeout)
}

func (w *manifestWorker) Work(ctx context.Context, job *river.Job[ManifestArgs]) error {
	return w.p.driveManifest(ctx, job.ID, job.Args.ManifestID)
}

// unbatchedScopes remembers the scopes whose vendor answered that it
// offers no batches: their batch work goes one by one.
type unbatchedScopes struct{ m sync.Map }

func (u *unbatchedScopes) mark(scope string) { u.m.Store(scope, true) }

func (u *unbatchedScopes) has(scope string) bool {
	_, ok := u.m.Load(scope)
	return ok
}

// manifestMode reports whether tenant's batch recordings go in manifests:
// manifests are on, its vendor has a batch contract, and its scope has not
// answered that it offers none.
func (p *Pipeline) manifestMode(tenant string) bool {
	if !p.cfg.Batch.Manifests {
		return false
	}
	t, ok := p.cfg.Tenants[tenant]
	if !ok {
		return false
	}
	bp, ok := p.providers[tenant].(stt.BatchProvider)
	return ok && bp.Capabilities().Batch && !p.unbatched.has(t.Scope)
}
