package sttsim

import (
	"context"
	"crypto/sha256"
	"net/http"
	"time"

	"github.com/google/uuid"
)

// maxBatchItems is the most items one batch may hold.
const maxBatchItems = 1000

// batch is one accepted batch. Its fields are set before it is shared.
type batch struct {
	id          string
	key         string
	fingerprint [sha256.Size]byte
	items       []batchItem
}

// batchItem is an item of a batch: its transcription (new, or the one its
// key created before), or the reason it was refused at intake.
type batchItem struct {
	key     string
	t       *transcription
	failure *apiError
	// lost: the server lost the item after accepting it
	// (BatchItemLoseShare): no answer about the batch lists it.
	lost bool
	// itemFailed: the item fails with a server error once transcribed
	// (BatchItemFailShare).
	itemFailed bool
}

// batchBody is the body of POST /v1/batches.
type batchBody struct {
	Model string       `json:"model,omitempty"`
	Items []submitBody `json:"items"`
}

// readBatchSubmit reads POST /v1/batches as far as its scope. The batch is
// throttled like a single submission, as one submission of its scope.
// Once admitted, each item stands on its own (see submitBatch).
func (s *Server) readBatchSubmit(r *http.Request, apiKey string) (incoming, *reply) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		rep := errorReply(http.StatusBadRequest, errInvalidRequest, "the Idempotency-Key header (the manifest's key) is required")
		return incoming{}, &rep
	}
	var in batchBody
	if rep := decodeBody(r, maxBatchBodyBytes, &in); rep != nil {
		return incoming{}, rep
	}
	if in.Model == "" {
		in.Model = ModelDefault
	}
	for i := range in.Items {
		in.Items[i].Model = in.Model
	}
	return incoming{
		scope:    Scope{APIKey: apiKey, Model: in.Model},
		key:      key,
		batch:    true,
		admitted: r.Header.Get("X-Admitted-At"),
		handle:   func(context.Context) reply { return s.submitBatch(key, in) },
	}, nil
}

// itemIntake is an item after the checks that need no lock.
type itemIntake struct {
	req         SubmitRequest
	fingerprint [sha256.Size]byte
	failure     *apiError
}

// submitBatch accepts or replays one admitted batch: an item whose key
// already created a transcription refers to it and is not transcribed
// again; an item that cannot be accepted (bad fields, unreadable audio, key
// reused with other content) is failed with its reason while the others go
// on.
func (s *Server) submitBatch(key string, in batchBody) reply {
	switch {
	case len(in.Items) == 0:
		return errorReply(http.StatusBadRequest, errInvalidRequest, "items must not be empty")
	case len(in.Items) > maxBatchItems:
		return errorReply(http.StatusUnprocessableEntity, errInvalidRequest, "a batch holds at most %d items", maxBatchItems)
	}
	seen := map[string]int{}
	for i, it := range in.Items {
		if it.IdempotencyKey == "" {
			return errorReply(http.StatusBadRequest, errInvalidRequest, "items[%d].idempotency_key is required", i)
		}
		if j, ok := seen[it.IdempotencyKey]; ok {
			return errorReply(http.StatusUnprocessableEntity, errInvalidRequest, "items[%d] repeats the idempotency_key of items[%d]", i, j)
		}
		seen[it.IdempotencyKey] = i
	}
	if rep := s.checkModel(in.Model); rep != nil {
		return *rep
	}
	manifest := batchFingerprint(in)
	if b, rep := s.lookupBatch(key, manifest); rep != nil || b != nil {
		return s.batchReply(b, rep, http.StatusAccepted)
	}

	intake := make([]itemIntake, len(in.Items))
	for i, it := range in.Items {
		req, rep := checkRequest(it.IdempotencyKey, it)
		if rep == nil {
			req.Audio, rep = s.probe(req.AudioURL)
		}
		if rep != nil {
			e := rep.body.(errorBody).Error
			intake[i].failure = &e
			continue
		}
		intake[i] = itemIntake{req: req, fingerprint: fingerprint(it)}
	}

	s.mu.Lock()
	if b, rep := s.lookupBatchLocked(key, manifest); rep != nil || b != nil {
		s.mu.Unlock()
		return s.batchReply(b, rep, http.StatusAccepted)
	}
	now := s.now()
	b := &batch{id: "b_" + uuid.NewString(), key: key, fingerprint: manifest, items: make([]batchItem, len(in.Items))}
	var fresh []int
	for i, it := range intake {
		item := &b.items[i]
		item.key = in.Items[i].IdempotencyKey
		switch t, ok := s.byKey[item.key]; {
		case it.failure != nil:
			item.failure = it.failure
		case ok && t.fingerprint != it.fingerprint:
			item.failure = &apiError{Type: errIdempotencyKeyReused, Message: "this idempotency_key was used for a different request (transcription " + t.id + ")"}
		case ok:
			item.t = t // already known: not transcribed again
		default:
			fresh = append(fresh, i)
		}
	}
	for j, i := range fresh {
		// Stagger the new items over ProcessingTime, so that a batch
		// completes item by item.
		readyAt := now.Add(time.Duration(int64(s.cfg.ProcessingTime) * int64(j+1) / int64(len(fresh))))
		b.items[i].t = s.acceptLocked(b.items[i].key, intake[i].fingerprint, intake[i].req, now, readyAt)
	}
	// The items' fates (BatchItemFailShare, BatchItemLoseShare): a failed
	// or lost item's key is forgotten, so that it can be sent again.
	for _, i := range fresh {
		switch {
		case s.rng.Chance(s.cfg.BatchItemLoseShare):
			b.items[i].lost = true
		case s.cfg.BatchItemFailShare > 0 && s.rng.Chance(s.cfg.BatchItemFailShare/(1-s.cfg.BatchItemLoseShare)):
			b.items[i].itemFailed = true
		default:
			continue
		}
		s.st.BatchItemsFailed += btoi(!b.items[i].lost)
		s.st.BatchItemsLost += btoi(b.items[i].lost)
		if s.byKey[b.items[i].key] == b.items[i].t {
			delete(s.byKey, b.items[i].key)
		}
		if b.items[i].lost {
			delete(s.byID, b.items[i].t.id)
		}
	}
	s.batches[b.id] = b
	s.batchByKey[key] = b
	drop := s.rng.Chance(s.cfg.DropAfterAcceptShare)
	s.mu.Unlock()

	for _, i := range fresh {
		s.transcribe(b.items[i].t)
	}
	for _, i := range fresh {
		if b.items[i].itemFailed {
			s.failItem(b.items[i].t)
		}
	}
	if s.cfg.OnAccept != nil {
		s.cfg.OnAccept(key)
	}
	var pendingUntil time.Time // the batch is one piece of work until its last new item is ready
	if len(fresh) > 0 {
		pendingUntil = b.items[fresh[len(fresh)-1]].t.readyAt
	}
	if drop {
		s.dropped(key)
		return reply{drop: true, pendingUntil: pendingUntil}
	}
	rep := s.batchReply(b, nil, http.StatusAccepted)
	rep.pendingUntil = pendingUntil
	return rep
}

// batchFingerprint identifies a batch's content: its model and its items'
// fingerprints, in order.
func batchFingerprint(in batchBody) [sha256.Size]byte {
	h := sha256.New()
	_, _ = h.Write([]byte(in.Model))
	for _, it := range in.Items {
		fp := fingerprint(it)
		_, _ = h.Write([]byte(it.IdempotencyKey))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write(fp[:])
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

func (s *Server) lookupBatch(key string, fp [sha256.Size]byte) (*batch, *reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookupBatchLocked(key, fp)
}

// lookupBatchLocked finds the batch that the manifest key created; other
// content under the same key is answered 422. Callers hold mu.
func (s *Server) lookupBatchLocked(key string, fp [sha256.Size]byte) (*batch, *reply) {
	b, ok := s.batchByKey[key]
	switch {
	case !ok:
		return nil, nil
	case b.fingerprint != fp:
		rep := errorReply(http.StatusUnprocessableEntity, errIdempotencyKeyReused,
			"this Idempotency-Key was used for a different batch (%s)", b.id)
		return nil, &rep
	}
	s.st.Replays++
	return b, nil
}

// handleBatchPoll answers GET /v1/batches/{id}.
func (s *Server) handleBatchPoll(r *http.Request, _ string) reply {
	s.mu.Lock()
	s.st.Polls++
	s.mu.Unlock()
	if rep := s.readTrouble(); rep != nil {
		return *rep
	}
	s.mu.Lock()
	b := s.batches[r.PathValue("id")]
	s.mu.Unlock()
	if b == nil {
		return errorReply(http.StatusNotFound, errNotFound, "no batch with this id")
	}
	return s.batchReply(b, nil, http.StatusOK)
}

// batchReply answers with b as it is now (or with rep), with
// Config.PollRetryAfter while it is unfinished.
func (s *Server) batchReply(b *batch, rep *reply, status int) reply {
	if rep != nil {
		return *rep
	}
	s.mu.Lock()
	v := batchView(b, s.now())
	s.mu.Unlock()
	out := reply{status: status, body: v}
	if v.Status == statusProcessing {
		out.retryAfter = s.cfg.PollRetryAfter
	}
	return out
}

// batchView is b as the wire shows it at now. The batch is processing
// while any item is queued or processing; then completed if any item
// completed, else failed. Callers hold mu.
func batchView(b *batch, now time.Time) batchJSON {
	v := batchJSON{ID: b.id, Items: make([]batchItemJSON, 0, len(b.items))}
	pending, completed := false, false
	for _, it := range b.items {
		if it.lost {
			continue
		}
		iv := batchItemJSON{IdempotencyKey: it.key, Status: statusFailed, Error: it.failure}
		if it.t != nil {
			id := it.t.id
			tv := transcriptionView(it.t, now)
			iv.TranscriptionID, iv.Status, iv.Error = &id, tv.Status, tv.Error
			if tv.Status == statusCompleted {
				iv.Transcription = &tv
			}
		}
		switch iv.Status {
		case statusQueued, statusProcessing:
			pending = true
		case statusCompleted:
			completed = true
		}
		v.Items = append(v.Items, iv)
	}
	switch {
	case pending:
		v.Status = statusProcessing
	case completed:
		v.Status = statusCompleted
	default:
		v.Status = statusFailed
	}
	return v
}

// failItem makes t, a batch item the transcriber has finished, failed with
// a server error (BatchItemFailShare). Its batch is not yet known to any
// client: the answer that names it is sent after this.
func (s *Server) failItem(t *transcription) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t.failure = &apiError{Type: errServerError, Message: "the transcriber failed on this item; send it again"}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
