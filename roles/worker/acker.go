package worker

import (
	"context"

	"github.com/rs/zerolog"

	"plaita/queue"
)

// acker acknowledges settled deliveries in batches: every ack that piles up while one is on
// the wire goes in the next XACK + XDEL, so under load the two commands are shared by many
// executions instead of paid by each. It never drops an ack: a full queue blocks the runner
// (back-pressure); what is not flushed when the process dies is redelivered, meets a settled
// execution, and is acked again as a no-op.
type acker struct {
	q     *queue.Queue
	log   zerolog.Logger
	ch    chan ackReq
	done  chan struct{}
	onAck func(n int) // counts acks that went through
}

type ackReq struct {
	id  string
	log zerolog.Logger
}

// ackBatch bounds one XACK + XDEL.
const ackBatch = 256

func newAcker(q *queue.Queue, log zerolog.Logger, onAck func(int)) *acker {
	return &acker{q: q, log: log, ch: make(chan ackReq, ackBatch), done: make(chan struct{}), onAck: onAck}
}

// run flushes until the channel is closed and drained.
func (a *acker) run() {
	defer close(a.done)
	batch := make([]ackReq, 0, ackBatch)
	for r := range a.ch {
		batch = append(batch[:0], r)
	more:
		for len(batch) < ackBatch {
			select {
			case r, ok := <-a.ch:
				if !ok {
					break more
				}
				batch = append(batch, r)
			default:
				break more
			}
		}
		a.flush(batch)
	}
}

func (a *acker) flush(batch []ackReq) {
	ids := make([]string, len(batch))
	for i, r := range batch {
		ids[i] = r.id
	}
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	if err := a.q.AckMany(ctx, ids); err != nil {
		for _, r := range batch {
			r.log.Warn().Err(err).Str("event", "worker.ack_failed").Msg("ack failed; the message will be redelivered (harmless: the state is saved)")
		}
		return
	}
	a.onAck(len(batch))
}

// ack queues one delivery's ack.
func (a *acker) ack(id string, log zerolog.Logger) { a.ch <- ackReq{id: id, log: log} }

// close flushes what is queued and stops.
func (a *acker) close() {
	close(a.ch)
	<-a.done
}
