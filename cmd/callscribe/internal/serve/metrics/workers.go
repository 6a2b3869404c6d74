package metrics

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// workerOccupancy counts, per River queue, the jobs this process is
// working against the workers it has for the queue.
type workerOccupancy struct {
	river.MiddlewareDefaults
	mu     sync.Mutex
	queues map[string]*queueOccupancy

	busyDesc, maxDesc, ratioDesc *prometheus.Desc
}

type queueOccupancy struct {
	busy atomic.Int64
	max  atomic.Int64
}

func newWorkerOccupancy() *workerOccupancy {
	return &workerOccupancy{
		queues: map[string]*queueOccupancy{},
		busyDesc: prometheus.NewDesc("callscribe_workers_busy",
			"River jobs this process is working now, by queue. Per process.", []string{"queue"}, nil),
		maxDesc: prometheus.NewDesc("callscribe_workers_max",
			"Workers this process has for the queue (River MaxWorkers). Per process.", []string{"queue"}, nil),
		ratioDesc: prometheus.NewDesc("callscribe_worker_occupancy",
			"Busy workers over the queue's workers in this process, 0 to 1 (1: every worker busy, work waits for a worker). Per process.",
			[]string{"queue"}, nil),
	}
}

func (w *workerOccupancy) queue(name string) *queueOccupancy {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[name]
	if q == nil {
		q = new(queueOccupancy)
		w.queues[name] = q
	}
	return q
}

// Work counts the job busy while it runs.
func (w *workerOccupancy) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	q := w.queue(job.Queue)
	q.busy.Add(1)
	defer q.busy.Add(-1)
	return doInner(ctx)
}

func (w *workerOccupancy) Describe(ch chan<- *prometheus.Desc) {
	ch <- w.busyDesc
	ch <- w.maxDesc
	ch <- w.ratioDesc
}

func (w *workerOccupancy) Collect(ch chan<- prometheus.Metric) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, q := range w.queues {
		busy, most := float64(q.busy.Load()), float64(q.max.Load())
		ch <- prometheus.MustNewConstMetric(w.busyDesc, prometheus.GaugeValue, busy, name)
		ch <- prometheus.MustNewConstMetric(w.maxDesc, prometheus.GaugeValue, most, name)
		ratio := 0.0
		if most > 0 {
			ratio = busy / most
		}
		ch <- prometheus.MustNewConstMetric(w.ratioDesc, prometheus.GaugeValue, ratio, name)
	}
}

// WorkerMiddleware returns the River middleware that counts this
// process's busy workers per queue (callscribe_workers_busy, and
// callscribe_worker_occupancy against callscribe_workers_max), given
// the River client's queues and their MaxWorkers. Install it in the
// process's one River client (river.Config.Middleware). A nil m: nil.
func (m *Metrics) WorkerMiddleware(queues map[string]river.QueueConfig) rivertype.WorkerMiddleware {
	if m == nil {
		return nil
	}
	for name, q := range queues {
		m.workers.queue(name).max.Store(int64(q.MaxWorkers))
	}
	return m.workers
}
