package queue

import (
	"context"
	"time"
)

// Producer is the one way a fresh task — a start or a resume that copies no earlier message —
// enters the stream: it stamps the producer's config generations (Envelope.Stamp), holds input
// and resume data to the state bound and the document rules (MaxInput) and enqueues. Every
// producer (the CLI and the console through package control, the filter, the schedule role, the
// benchmarks) uses one, so none can forget a step. Copies of existing messages (requeue, replay,
// the delay queue's script) keep their source's stamps and go through Queue or Delay instead.
type Producer struct {
	d        Driver
	stream   string
	gens     Generations
	maxInput int
	now      func() time.Time
}

// NewProducer returns a producer to stream with the producer's generations and input bound
// (PLAITA_EXECUTION_STATE_MAX_BYTES; < 1: none). now is the clock of the stamps,
// config_effective_at and created_at (nil: time.Now).
func NewProducer(d Driver, stream string, gens Generations, maxInput int, now func() time.Time) *Producer {
	if now == nil {
		now = time.Now
	}
	return &Producer{d: d, stream: stream, gens: gens, maxInput: maxInput, now: now}
}

// Stream is the stream the producer writes to.
func (p *Producer) Stream() string { return p.stream }

// Enqueue stamps and enqueues one fresh task: its stream entry id, or an error that matches
// ErrInvalidEnvelope (ErrInputTooLarge, ErrBadInput, …) when nothing was written.
func (p *Producer) Enqueue(ctx context.Context, env Envelope) (string, error) {
	now := p.now()
	env.Stamp(p.gens, now)
	if env.CreatedAt.IsZero() {
		env.CreatedAt = now.UTC()
	}
	return Enqueue(ctx, p.d, p.stream, env, MaxInput(p.maxInput))
}
