package stt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"strings"
	"sync"
)

// audioError is ErrAudioUnreadable with the cause, its text scrubbed.
type audioError struct {
	msg string
	err error
}

func (e *audioError) Error() string   { return e.msg }
func (e *audioError) Unwrap() []error { return []error{ErrAudioUnreadable, e.err} }

// newAudioError wraps a failure to read the audio.
func newAudioError(name string, err error, s scrubber) error {
	return &audioError{msg: fmt.Sprintf("stt: audio %q unreadable: %s", s.Text(name), s.Text(err.Error())), err: err}
}

// audioBody is the audio as a request body. It records the first read
// failure, and, when the length is known, refuses audio of another length,
// so that the adapter can tell a broken audio source (an error for the
// caller) from a broken network (a Response).
type audioBody struct {
	rc   io.ReadCloser
	want int64 // Request.AudioBytes; <= 0 unknown
	name string
	s    scrubber

	n int64 // bytes read; only the reading goroutine touches it

	mu       sync.Mutex // guards err and finished, which the adapter reads after the exchange
	err      error
	finished bool // the exchange is over: later failures are not the audio's fault

	closeOnce sync.Once
	closeErr  error
}

// openAudio opens the request's audio. It returns ErrNoAudio when there is
// no OpenAudio, ErrAudioUnreadable when it fails.
func openAudio(ctx context.Context, req Request, s scrubber) (*audioBody, error) {
	if req.OpenAudio == nil {
		return nil, fmt.Errorf("%w: this provider uploads the audio bytes and Request.OpenAudio is nil", ErrNoAudio)
	}
	name := audioName(req)
	rc, err := req.OpenAudio(ctx)
	if err != nil {
		return nil, newAudioError(name, err, s)
	}
	if rc == nil {
		return nil, newAudioError(name, errors.New("OpenAudio returned no reader"), s)
	}
	return &audioBody{rc: rc, want: req.AudioBytes, name: name, s: s}, nil
}

// Read reads the audio, enforcing the known length.
func (a *audioBody) Read(p []byte) (int, error) {
	if err := a.failure(); err != nil {
		return 0, err
	}
	if a.want > 0 {
		remaining := a.want - a.n
		if remaining <= 0 {
			var one [1]byte
			k, err := io.ReadFull(a.rc, one[:])
			switch {
			case k > 0:
				return 0, a.fail(fmt.Errorf("audio is longer than AudioBytes (%d)", a.want))
			case errors.Is(err, io.EOF):
				return 0, io.EOF
			default:
				return 0, a.fail(err)
			}
		}
		if int64(len(p)) > remaining {
			p = p[:remaining]
		}
	}
	k, err := a.rc.Read(p)
	a.n += int64(k)
	switch {
	case errors.Is(err, io.EOF):
		if a.want > 0 && a.n < a.want {
			return k, a.fail(fmt.Errorf("audio is %d bytes, shorter than AudioBytes (%d)", a.n, a.want))
		}
		return k, io.EOF
	case err != nil:
		return k, a.fail(err)
	}
	return k, nil
}

// fail records the first failure and returns it.
func (a *audioBody) fail(err error) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.finished {
		return err
	}
	if a.err == nil {
		a.err = newAudioError(a.name, err, a.s)
	}
	return a.err
}

// Close closes the audio source, once: the HTTP client closes a request
// body, and the adapter closes it again in case the request never went.
func (a *audioBody) Close() error {
	a.closeOnce.Do(func() { a.closeErr = a.rc.Close() })
	return a.closeErr
}

// failure returns the recorded failure, if any.
func (a *audioBody) failure() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// finish ends the exchange: it returns the recorded failure, if any, and
// closes the audio. Failures after it (a transport still reading when the
// server answered early) are not recorded.
func (a *audioBody) finish() error {
	a.mu.Lock()
	a.finished = true
	err := a.err
	a.mu.Unlock()
	_ = a.Close()
	return err
}

// audioName is the file name sent with an upload: Request.AudioName, else
// the last element of the audio URL's path, else "audio.wav".
func audioName(req Request) string {
	if req.AudioName != "" {
		return req.AudioName
	}
	if u, err := url.Parse(req.AudioURL); err == nil {
		if b := path.Base(u.Path); b != "." && b != "/" && b != "" {
			return b
		}
	}
	return "audio.wav"
}

// audioContentTypes maps audio file extensions to media types. A fixed
// table, not mime.TypeByExtension, so the answer does not depend on the
// machine's MIME database.
var audioContentTypes = map[string]string{
	".aac":  "audio/aac",
	".amr":  "audio/amr",
	".flac": "audio/flac",
	".m4a":  "audio/mp4",
	".mp3":  "audio/mpeg",
	".mp4":  "audio/mp4",
	".mpeg": "audio/mpeg",
	".mpga": "audio/mpeg",
	".oga":  "audio/ogg",
	".ogg":  "audio/ogg",
	".opus": "audio/opus",
	".wav":  "audio/wav",
	".webm": "audio/webm",
}

// audioContentType is the media type for an audio file name; audio/wav
// when the extension is unknown (call recordings usually are WAV).
func audioContentType(name string) string {
	if ct, ok := audioContentTypes[strings.ToLower(path.Ext(name))]; ok {
		return ct
	}
	return "audio/wav"
}
