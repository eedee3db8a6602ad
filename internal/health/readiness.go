// Package health is the small HTTP endpoint every role serves for its operators: /metrics
// (the process's metrics set), /healthz (the process runs) and /readyz (it should receive
// work). A role flips a Readiness; the endpoint only reports it.
package health

import "sync"

// Prober tells /readyz whether this process should receive work; reason is one line saying
// why not ("draining", "consumer group not ensured yet" …).
type Prober interface {
	Ready() (ok bool, reason string)
}

// Readiness is the Prober a role flips: not ready ("starting") until SetReady, not ready again
// with a reason while draining (a draining instance must leave the load balancer before it
// stops). Safe for concurrent use.
type Readiness struct {
	mu     sync.Mutex
	ready  bool
	reason string
}

// NewReadiness starts not ready with the reason "starting".
func NewReadiness() *Readiness { return &Readiness{reason: "starting"} }

// SetReady marks the process ready.
func (r *Readiness) SetReady() {
	r.mu.Lock()
	r.ready, r.reason = true, ""
	r.mu.Unlock()
}

// SetNotReady marks the process not ready, with a one-line reason.
func (r *Readiness) SetNotReady(reason string) {
	r.mu.Lock()
	r.ready, r.reason = false, reason
	r.mu.Unlock()
}

// Ready implements Prober.
func (r *Readiness) Ready() (bool, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ready, r.reason
}
