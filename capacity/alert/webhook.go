package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/callscribe/callscribe/capacity"
)

// Defaults of WebhookConfig.
const (
	TimeoutDefault   = 5 * time.Second
	AttemptsDefault  = 3
	BackoffDefault   = 500 * time.Millisecond
	QueueSizeDefault = 64
)

// WebhookConfig configures NewWebhook.
type WebhookConfig struct {
	// URL receives a POST per alert. Required: absolute http(s).
	URL string
	// Token, when set, is sent as Authorization: Bearer TOKEN; never
	// logged. Default "": none.
	Token string
	// Timeout bounds each try. Default 0: TimeoutDefault (5s).
	Timeout time.Duration
	// Attempts is how many tries an alert gets. Default 0: AttemptsDefault (3).
	Attempts int
	// Backoff is the wait before the second try, doubling after.
	// Default 0: BackoffDefault (500ms).
	Backoff time.Duration
	// QueueSize bounds the alerts waiting for delivery; more are dropped.
	// Default 0: QueueSizeDefault (64).
	QueueSize int
	// Client sends the requests. Default nil: a client that follows no
	// redirect.
	Client *http.Client
	// Logger receives failed deliveries. Default nil: discard.
	Logger *slog.Logger
}

// Webhook delivers alerts in the background. Safe for concurrent use.
type Webhook struct {
	cfg   WebhookConfig
	queue chan capacity.LimitLearned
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once

	delivered, failed, dropped atomic.Int64
}

// NewWebhook checks cfg and starts the delivering goroutine; Close stops it.
func NewWebhook(cfg WebhookConfig) (*Webhook, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("alert.WebhookConfig.URL must be an absolute http(s) URL")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = TimeoutDefault
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = AttemptsDefault
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = BackoffDefault
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = QueueSizeDefault
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Webhook{cfg: cfg, queue: make(chan capacity.LimitLearned, cfg.QueueSize), stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w, nil
}

// Notify queues a for delivery and returns at once; when the queue is
// full (or the webhook closed) a is dropped and counted.
func (w *Webhook) Notify(a capacity.LimitLearned) {
	select {
	case <-w.stop:
		w.dropped.Add(1)
		return
	default:
	}
	select {
	case w.queue <- a:
	default:
		w.dropped.Add(1)
	}
}

// Close stops delivering: a try under way is cancelled; queued alerts
// are dropped and counted. Safe to call more than once.
func (w *Webhook) Close() {
	w.once.Do(func() { close(w.stop) })
	<-w.done
	for {
		select {
		case <-w.queue:
			w.dropped.Add(1)
		default:
			return
		}
	}
}

// Delivered, Failed and Dropped count alerts accepted by the webhook,
// given up after every try, and dropped (queue full, or closed).
func (w *Webhook) Delivered() int64 { return w.delivered.Load() }
func (w *Webhook) Failed() int64    { return w.failed.Load() }
func (w *Webhook) Dropped() int64   { return w.dropped.Load() }

func (w *Webhook) run() {
	defer close(w.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-w.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		select {
		case <-w.stop:
			return
		case a := <-w.queue:
			w.deliver(ctx, a)
		}
	}
}

// payload is the JSON body of an alert.
type payload struct {
	Provider        string    `json:"provider"`
	Kind            string    `json:"kind"`
	ConfiguredLimit int       `json:"configured_limit"`
	LearnedLimit    int       `json:"learned_limit"`
	At              time.Time `json:"at"`
	// Reporter: the organisation that reported the refusal over the
	// capacity API; absent when the process met it itself.
	Reporter string `json:"reporter,omitempty"`
}

func (w *Webhook) deliver(ctx context.Context, a capacity.LimitLearned) {
	body, err := json.Marshal(payload{Provider: a.Provider, Kind: a.Kind, ConfiguredLimit: a.ConfiguredLimit,
		LearnedLimit: a.LearnedLimit, At: a.At.UTC(), Reporter: a.Reporter})
	if err != nil {
		w.failed.Add(1)
		return
	}
	backoff := w.cfg.Backoff
	for try := 1; ; try++ {
		err = w.post(ctx, body)
		if err == nil {
			w.delivered.Add(1)
			return
		}
		var perm *permanentError
		if try >= w.cfg.Attempts || errors.As(err, &perm) || ctx.Err() != nil {
			break
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		backoff *= 2
	}
	w.failed.Add(1)
	w.cfg.Logger.Warn("capacity: learned-limit alert not delivered to the webhook",
		slog.String("provider", a.Provider), slog.String("kind", a.Kind), slog.String("error", err.Error()))
}

// permanentError is an answer not worth another try (a 4xx but 429).
type permanentError struct{ status int }

func (e *permanentError) Error() string { return fmt.Sprintf("webhook answered %d", e.status) }

func (w *Webhook) post(ctx context.Context, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building the request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "callscribe-capacity-alert")
	if w.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+w.cfg.Token)
	}
	resp, err := w.cfg.Client.Do(req)
	if err != nil {
		// url.Error names the URL, which may carry a secret in its query: keep the cause only.
		var ue *url.Error
		if errors.As(err, &ue) {
			return fmt.Errorf("posting the alert: %w", ue.Err)
		}
		return fmt.Errorf("posting the alert: %w", err)
	}
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return fmt.Errorf("webhook answered %d", resp.StatusCode)
	default:
		return &permanentError{status: resp.StatusCode}
	}
}
