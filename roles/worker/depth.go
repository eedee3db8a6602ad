package worker

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/internal/health"
	"plaita/queue"
)

// DepthReader is what QueueDepthCollector reads (*queue.Queue).
type DepthReader interface {
	Depth(ctx context.Context) (queue.Depth, error)
}

// QueueDepthCollector returns a /metrics collector that reads the queue's depth on every scrape
// into plaita_queue_stream_length, plaita_queue_pending and plaita_queue_dlq_length{queue="…"}.
// A failed read keeps the last values, counts plaita_queue_depth_read_failed_total{queue="…"}
// and logs once per outage.
func QueueDepthCollector(q DepthReader, stream string, set *metrics.Set, log zerolog.Logger) health.Collector {
	label := `{queue="` + promLabel(stream) + `"}`
	length := set.GetOrCreateGauge("plaita_queue_stream_length"+label, nil)
	pending := set.GetOrCreateGauge("plaita_queue_pending"+label, nil)
	dlq := set.GetOrCreateGauge("plaita_queue_dlq_length"+label, nil)
	failed := set.GetOrCreateCounter("plaita_queue_depth_read_failed_total" + label)
	var failing atomic.Bool
	return func(ctx context.Context) {
		d, err := q.Depth(ctx)
		if err != nil {
			failed.Inc()
			if failing.CompareAndSwap(false, true) {
				log.Warn().Str("event", "worker.queue_depth_failed").Str("queue", stream).Err(err).
					Msg("cannot read queue depth for /metrics; the gauges keep their last values")
			}
			return
		}
		failing.Store(false)
		length.Set(float64(d.StreamLength))
		pending.Set(float64(d.Pending))
		dlq.Set(float64(d.DLQLength))
	}
}

func promLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
