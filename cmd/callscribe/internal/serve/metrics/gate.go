package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/callscribe/callscribe/capacity/live"
)

// GateSource is the admission gate Config.Gate reads: *live.Gate.
type GateSource interface {
	// InUse reads the tickets held over every process, from Redis.
	InUse(ctx context.Context) (int, error)
	// Stats returns this process's figures.
	Stats() live.GateStats
}

// The admission gate's series, labelled by the gate's name.
var (
	descGateInUse = prometheus.NewDesc("callscribe_gate_in_use",
		"Tickets held in the admission gate (calls admitted and not yet left or reclaimed), over every process sharing it. Global: read from Redis.",
		[]string{"gate"}, nil)
	descGateSize = prometheus.NewDesc("callscribe_gate_size",
		"Calls the admission gate admits at once (capacity.gate.size).", []string{"gate"}, nil)
	descGateWaiting = prometheus.NewDesc("callscribe_gate_waiting",
		"Calls waiting for room at the admission gate in this process. Per process.", []string{"gate"}, nil)
	descGateAdmitted = prometheus.NewDesc("callscribe_gate_admitted_total",
		"Calls admitted through the admission gate, uncounted ones (Redis unreachable) included. Per process.", []string{"gate"}, nil)
	descGateRejected = prometheus.NewDesc("callscribe_gate_rejected_total",
		"Calls rejected by the admission gate: no room within their timeout (429 gate_full). Per process.", []string{"gate"}, nil)
	descGateReclaimed = prometheus.NewDesc("callscribe_gate_reclaimed_total",
		"Admission gate tickets never left whose place was reclaimed after capacity.gate.ticket_ttl, by this process's enters. Per process.",
		[]string{"gate"}, nil)
	descGateWait = prometheus.NewDesc("callscribe_gate_wait_seconds",
		"Seconds a call waited at the admission gate, by outcome (admitted, rejected). Per process.", []string{"gate", "outcome"}, nil)

	gateDescs = []*prometheus.Desc{descGateInUse, descGateSize, descGateWaiting, descGateAdmitted, descGateRejected,
		descGateReclaimed, descGateWait}
)

// collectGate sends the gate's series: this process's first, then the
// tickets held as Redis counts them (left out when Redis cannot be read).
func collectGate(ctx context.Context, g GateSource, ch chan<- prometheus.Metric) error {
	st := g.Stats()
	ch <- prometheus.MustNewConstMetric(descGateSize, prometheus.GaugeValue, float64(st.Size), st.Name)
	ch <- prometheus.MustNewConstMetric(descGateWaiting, prometheus.GaugeValue, float64(st.Waiting), st.Name)
	ch <- prometheus.MustNewConstMetric(descGateAdmitted, prometheus.CounterValue, float64(st.Admitted), st.Name)
	ch <- prometheus.MustNewConstMetric(descGateRejected, prometheus.CounterValue, float64(st.Rejected), st.Name)
	ch <- prometheus.MustNewConstMetric(descGateReclaimed, prometheus.CounterValue, float64(st.Reclaimed), st.Name)
	for _, o := range []live.GateOutcome{live.GateAdmitted, live.GateRejected} {
		w := st.Waits[o]
		ch <- prometheus.MustNewConstHistogram(descGateWait, w.Count, w.Sum, w.Cumulative, st.Name, o.String())
	}
	n, err := g.InUse(ctx)
	if err != nil {
		return err
	}
	ch <- prometheus.MustNewConstMetric(descGateInUse, prometheus.GaugeValue, float64(n), st.Name)
	return nil
}
