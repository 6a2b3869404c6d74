package app

import (
	"fmt"
	"sync/atomic"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/alert"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/metrics"
)

// LimitAlerts fans a learned-limit alert out, besides capacity's own log
// line and limit event: to this process's metrics and to the webhook of
// capacity.alerts. Both are attached after the leases are opened, hence
// the atomic pointers. It never blocks (the webhook queues).
type LimitAlerts struct {
	metrics atomic.Pointer[metrics.Metrics]
	webhook atomic.Pointer[alert.Webhook]
}

func (l *LimitAlerts) learned(x capacity.LimitLearned) {
	if m := l.metrics.Load(); m != nil {
		m.LimitLearned(x.Provider, x.Kind)
	}
	if w := l.webhook.Load(); w != nil {
		w.Notify(x)
	}
}

// Alerts returns the process's learned-limit fan-out.
func (a *App) Alerts() *LimitAlerts {
	if a.limitAlerts == nil {
		a.limitAlerts = &LimitAlerts{}
	}
	return a.limitAlerts
}

// StartAlertWebhook starts the webhook of capacity.alerts.webhook_url, if
// set, for a long-running command (serve, worker); the returned func
// stops it. Call it before newMetrics, which counts its outcomes.
func (a *App) StartAlertWebhook() (func(), error) {
	c := a.Config.Capacity.Alerts
	if c.WebhookURL == "" {
		return func() {}, nil
	}
	w, err := alert.NewWebhook(alert.WebhookConfig{URL: c.WebhookURL, Token: c.WebhookToken, Logger: a.Logger})
	if err != nil {
		return nil, fmt.Errorf("capacity.alerts.webhook_url: %w", err)
	}
	a.Alerts().webhook.Store(w)
	return func() {
		a.Alerts().webhook.Store(nil)
		w.Close()
	}, nil
}

// Webhook is the webhook of capacity.alerts attached by StartAlertWebhook,
// nil when none.
func (l *LimitAlerts) Webhook() *alert.Webhook { return l.webhook.Load() }

// AttachMetrics makes m count every learned-limit alert from now on.
func (l *LimitAlerts) AttachMetrics(m *metrics.Metrics) { l.metrics.Store(m) }
