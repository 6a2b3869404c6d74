// Package alert delivers capacity's learned-limit alerts
// (capacity.LimitLearned) to a platform team's webhook.
//
// Webhook.Notify never blocks: it puts the alert on a bounded queue and
// returns, so the acquire and refusal paths of capacity never wait on the
// network. One goroutine delivers the queue in order: a POST of JSON
// {provider, kind, configured_limit, learned_limit, at}, with reporter
// (the organisation) when a refusal came in over the capacity API, with a
// short timeout, retried a bounded number of times on a network error, a
// 429 or a 5xx. When the queue is full the alert is dropped and counted
// (Dropped); an alert whose tries all fail is counted (Failed) and logged
// without the token.
//
// What it does not do: it keeps nothing across restarts (the learned
// limit itself is in Redis, and the status page and metrics show it), and
// it does not deduplicate: each refusal that lowers a limit is one alert.
package alert
