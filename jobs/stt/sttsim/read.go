package sttsim

import "net/http"

// handlePoll answers GET /v1/transcriptions/{id}.
func (s *Server) handlePoll(r *http.Request, _ string) reply {
	s.mu.Lock()
	s.st.Polls++
	s.mu.Unlock()
	if rep := s.readTrouble(); rep != nil {
		return *rep
	}
	s.mu.Lock()
	t := s.byID[r.PathValue("id")]
	s.mu.Unlock()
	if t == nil {
		return errorReply(http.StatusNotFound, errNotFound, "no transcription with this id")
	}
	return s.found(t)
}

// handleReconcile answers GET /v1/transcriptions?idempotency_key=K.
func (s *Server) handleReconcile(r *http.Request, _ string) reply {
	s.mu.Lock()
	s.st.Reconciles++
	s.mu.Unlock()
	key := r.URL.Query().Get("idempotency_key")
	if key == "" {
		return errorReply(http.StatusBadRequest, errInvalidRequest, "the idempotency_key query parameter is required")
	}
	if rep := s.readTrouble(); rep != nil {
		return *rep
	}
	s.mu.Lock()
	t := s.byKey[key]
	s.mu.Unlock()
	if t == nil {
		return errorReply(http.StatusNotFound, errNotFound, "no request with this idempotency key was accepted")
	}
	return s.found(t)
}

// found is the 200 answer of a read of t, with Config.PollRetryAfter while
// it is unfinished.
func (s *Server) found(t *transcription) reply {
	v := s.view(t)
	rep := reply{status: http.StatusOK, body: v}
	if v.Status == statusQueued || v.Status == statusProcessing {
		rep.retryAfter = s.cfg.PollRetryAfter
	}
	return rep
}
