package stt

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/callscribe/callscribe/internal/vendorhttp"
)

// genericBatchBody is the body of POST /v1/batches.
type genericBatchBody struct {
	Model string             `json:"model"`
	Items []genericBatchItem `json:"items"`
}

type genericBatchItem struct {
	IdempotencyKey string `json:"idempotency_key"`
	AudioURL       string `json:"audio_url"`
	AudioSHA256    string `json:"audio_sha256"`
	Language       string `json:"language,omitempty"`
}

// genericBatch is the protocol's batch object.
type genericBatch struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Items  []struct {
		IdempotencyKey  string                `json:"idempotency_key"`
		TranscriptionID *string               `json:"transcription_id"`
		Status          string                `json:"status"`
		Transcription   *genericTranscription `json:"transcription"`
		Error           *genericErrorBody     `json:"error"`
	} `json:"items"`
}

// genericRetryableItemTypes are the error types of a failed batch item
// worth sending again: the transcriber's trouble, not the item's.
var genericRetryableItemTypes = map[string]bool{
	ClassServerError: true, ClassUnavailable: true, ClassRateLimited: true,
}

var _ BatchProvider = (*GenericHTTP)(nil)

// SubmitBatch sends POST /v1/batches with the manifest key as
// Idempotency-Key. A 404 is ErrBatchUnsupported (with the Response).
func (g *GenericHTTP) SubmitBatch(ctx context.Context, req BatchRequest) (BatchResponse, error) {
	switch {
	case req.ManifestKey == "":
		return BatchResponse{}, fmt.Errorf("%w: generic-http: BatchRequest.ManifestKey is required", ErrInvalidArgument)
	case len(req.Items) == 0 || len(req.Items) > MaxBatchItems:
		return BatchResponse{}, fmt.Errorf("%w: generic-http: a batch holds 1 to %d items, not %d", ErrInvalidArgument, MaxBatchItems, len(req.Items))
	}
	body := genericBatchBody{Model: model(Request{Model: req.Model}, g.model), Items: make([]genericBatchItem, len(req.Items))}
	secrets := []string{g.ep.apiKey}
	for i, it := range req.Items {
		if it.IdempotencyKey == "" || it.AudioURL == "" {
			return BatchResponse{}, fmt.Errorf("%w: generic-http: batch item %d needs an IdempotencyKey and an AudioURL", ErrInvalidArgument, i)
		}
		body.Items[i] = genericBatchItem{IdempotencyKey: it.IdempotencyKey, AudioURL: it.AudioURL, AudioSHA256: it.AudioSHA256, Language: it.Language}
		secrets = append(secrets, it.AudioURL)
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return BatchResponse{}, fmt.Errorf("stt: generic-http: encoding batch: %w", err)
	}
	s := newScrubber(secrets[0], secrets[1:]...)
	rep, failed, err := g.send(ctx, s, http.MethodPost, g.ep.URL("/v1/batches", nil), raw, nil, req.ManifestKey, req.RequestID)
	if err != nil || failed != nil {
		return BatchResponse{Response: derefOr(failed)}, err
	}
	out := g.interpretBatch(rep, s)
	if rep.Status == http.StatusNotFound {
		return out, ErrBatchUnsupported
	}
	return out, nil
}

// PollBatch sends GET /v1/batches/{id}.
func (g *GenericHTTP) PollBatch(ctx context.Context, batchID string) (BatchResponse, error) {
	if batchID == "" {
		return BatchResponse{}, fmt.Errorf("%w: generic-http: empty batch id", ErrInvalidArgument)
	}
	s := newScrubber(g.ep.apiKey)
	rep, failed, err := g.send(ctx, s, http.MethodGet, g.ep.URL("/v1/batches/"+url.PathEscape(batchID), nil), nil, nil, "", "")
	if err != nil || failed != nil {
		return BatchResponse{Response: derefOr(failed)}, err
	}
	out := g.interpretBatch(rep, s)
	if rep.Status == http.StatusNotFound {
		out.Outcome, out.Class = OutcomeNotFound, ClassNotFound
	}
	return out, nil
}

// interpretBatch applies the response table to a batch answer: a batch
// object on 200 and 202, an error otherwise (as a single request's).
func (g *GenericHTTP) interpretBatch(rep vendorhttp.Reply, s scrubber) BatchResponse {
	if rep.Status != http.StatusOK && rep.Status != http.StatusAccepted {
		r := g.interpret(rep, opSubmit, "", s)
		return BatchResponse{Response: r}
	}
	var b genericBatch
	if err := json.Unmarshal(rep.Body, &b); err != nil {
		return BatchResponse{Response: badResponse(rep, "unparseable batch: "+err.Error(), s)}
	}
	if b.ID == "" {
		return BatchResponse{Response: badResponse(rep, "batch without an id", s)}
	}
	out := BatchResponse{Response: Response{HTTPStatus: rep.Status, ProviderID: b.ID}}
	switch b.Status {
	case "queued", "processing":
		out.Outcome, out.Class, out.PollAfter = OutcomePending, ClassProcessing, vendorhttp.RawHeader(rep.Header, "Retry-After")
		if rep.Status == http.StatusAccepted {
			out.Class = ClassAccepted
		}
	case "completed", "failed":
		out.Outcome, out.Class = OutcomeCompleted, ClassCompleted
	default:
		return BatchResponse{Response: badResponse(rep, fmt.Sprintf("unknown batch status %q", b.Status), s)}
	}
	seen := make(map[string]bool, len(b.Items))
	for i, it := range b.Items {
		if it.IdempotencyKey == "" || seen[it.IdempotencyKey] {
			return BatchResponse{Response: badResponse(rep, fmt.Sprintf("batch item %d has no idempotency_key, or repeats one", i), s)}
		}
		seen[it.IdempotencyKey] = true
		item := BatchItem{IdempotencyKey: it.IdempotencyKey}
		r := &item.Response
		r.HTTPStatus = rep.Status
		if it.TranscriptionID != nil {
			r.ProviderID = *it.TranscriptionID
		}
		switch it.Status {
		case "completed":
			if it.Transcription == nil {
				*r = badResponse(rep, "completed batch item without its transcription", s)
				break
			}
			*r = g.transcription(rep, *it.Transcription, opPoll, "", s)
		case "queued", "processing":
			r.Outcome, r.Class = OutcomePending, ClassQueued
			if it.Status == "processing" {
				r.Class = ClassProcessing
			}
		case "failed":
			r.Outcome, r.Class = OutcomePermanent, ClassTranscriptionFailed
			if it.Error != nil {
				r.Message = s.Message(it.Error.Message)
				if genericRetryableItemTypes[it.Error.Type] {
					r.Outcome, r.Class = OutcomeTransient, it.Error.Type
				} else if genericPermanentTypes[it.Error.Type] {
					r.Class = it.Error.Type
				}
			}
		default:
			*r = badResponse(rep, fmt.Sprintf("unknown batch item status %q", it.Status), s)
		}
		out.Items = append(out.Items, item)
	}
	return out
}
