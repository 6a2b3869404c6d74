package stt

import (
	"context"
	"errors"
)

// ErrBatchUnsupported: the vendor answered 404 to a batch submission, so
// it offers no batch contract (stt-http/v1's batch section is optional);
// submit the items one by one. Returned by BatchProvider.SubmitBatch with
// a BatchResponse that records the answer.
var ErrBatchUnsupported = errors.New("the vendor offers no batches")

// MaxBatchItems is the most items one BatchRequest may hold (stt-http/v1
// servers take at least this many).
const MaxBatchItems = 1000

// BatchRequest is one manifest: several recordings of one tenant, provider
// and model, sent in one request.
type BatchRequest struct {
	// ManifestKey is the manifest's stable key, sent as the batch
	// request's Idempotency-Key: the same key with the same items returns
	// the batch it created (reconciliation after a crash), never a second
	// one. Required.
	ManifestKey string
	// Model overrides the adapter's configured model; "" means that one.
	Model string
	// Items, 1 to MaxBatchItems, each with its own IdempotencyKey (the
	// recording's business key), AudioURL, AudioSHA256 and Language; the
	// other Request fields are not sent.
	Items []Request
	// RequestID is a per-attempt id, sent as X-Request-Id.
	RequestID string
}

// BatchItem is one item of a batch as the vendor reports it.
type BatchItem struct {
	// IdempotencyKey is the item's key, as sent.
	IdempotencyKey string
	// Response is the item's state as a single transcription's would be:
	// OutcomeCompleted with the Transcript, OutcomePending while queued or
	// processing, OutcomeTransient for an item that failed in a way worth
	// sending again (a server error, an unavailable transcriber), and
	// OutcomePermanent for one that will not succeed as sent (its Class
	// the error's type). ProviderID is the item's transcription id.
	Response Response
}

// BatchResponse is what one batch submission or poll came to.
type BatchResponse struct {
	// Response is the call itself: OutcomePending while the batch is
	// processing, OutcomeCompleted when it has finished (whatever its
	// items came to), or the failure of the call (throttled, transient,
	// permanent, quota exhausted) with its headers read as a single
	// request's. ProviderID is the batch id once known.
	Response
	// Items are the batch's items as the vendor listed them, in its
	// order. An item sent but not listed is lost: the vendor no longer
	// knows it (Missing).
	Items []BatchItem
}

// Missing returns the keys of sent that the response does not list.
func (b BatchResponse) Missing(sent []string) []string {
	listed := make(map[string]bool, len(b.Items))
	for _, it := range b.Items {
		listed[it.IdempotencyKey] = true
	}
	var out []string
	for _, k := range sent {
		if !listed[k] {
			out = append(out, k)
		}
	}
	return out
}

// BatchProvider is a Provider that can also submit manifests (Capabilities
// Batch). Errors mean misuse only, as for Provider, plus
// ErrBatchUnsupported.
type BatchProvider interface {
	Provider
	// SubmitBatch sends the manifest.
	SubmitBatch(ctx context.Context, req BatchRequest) (BatchResponse, error)
	// PollBatch asks about a batch SubmitBatch accepted.
	PollBatch(ctx context.Context, batchID string) (BatchResponse, error)
}
