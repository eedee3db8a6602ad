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
	first  chan struct{} // closed the first time the process is ready
}

// NewReadiness starts not ready with the reason "starting".
func NewReadiness() *Readiness { return &Readiness{reason: "starting", first: make(chan struct{})} }

// SetReady marks the process ready.
func (r *Readiness) SetReady() {
	r.mu.Lock()
	if !r.ready && r.first != nil {
		select {
		case <-r.first:
		default:
			close(r.first)
		}
	}
	r.ready, r.reason = true, ""
	r.mu.Unlock()
}

// BecameReady is closed the first time the process is ready: a signal for whoever waits on a
// role run in process (roles.Hooks), where no probe asks /readyz.
func (r *Readiness) BecameReady() <-chan struct{} { return r.first }

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
