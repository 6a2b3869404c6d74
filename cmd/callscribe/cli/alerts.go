package cli

import (
	"fmt"
	"sync/atomic"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/alert"
	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/metrics"
)

// limitAlerts fans a learned-limit alert out, besides capacity's own log
// line and limit event: to this process's metrics and to the webhook of
// capacity.alerts. Both are attached after the leases are opened, hence
// the atomic pointers. It never blocks (the webhook queues).
type limitAlerts struct {
	metrics atomic.Pointer[metrics.Metrics]
	webhook atomic.Pointer[alert.Webhook]
}

func (l *limitAlerts) learned(x capacity.LimitLearned) {
	if m := l.metrics.Load(); m != nil {
		m.LimitLearned(x.Provider, x.Kind)
	}
	if w := l.webhook.Load(); w != nil {
		w.Notify(x)
	}
}

// alerts returns the process's learned-limit fan-out.
func (a *app) alerts() *limitAlerts {
	if a.limitAlerts == nil {
		a.limitAlerts = &limitAlerts{}
	}
	return a.limitAlerts
}

// startAlertWebhook starts the webhook of capacity.alerts.webhook_url, if
// set, for a long-running command (serve, worker); the returned func
// stops it. Call it before newMetrics, which counts its outcomes.
func (a *app) startAlertWebhook() (func(), error) {
	c := a.config.Capacity.Alerts
	if c.WebhookURL == "" {
		return func() {}, nil
	}
	w, err := alert.NewWebhook(alert.WebhookConfig{URL: c.WebhookURL, Token: c.WebhookToken, Logger: a.logger})
	if err != nil {
		return nil, fmt.Errorf("capacity.alerts.webhook_url: %w", err)
	}
	a.alerts().webhook.Store(w)
	return func() {
		a.alerts().webhook.Store(nil)
		w.Close()
	}, nil
}
