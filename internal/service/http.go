package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
)

// HTTP is an http.Server run as a service: Serve starts it on a listener and returns at once;
// Stop shuts it down gracefully — the requests in flight finish, bounded by the stop's context,
// after which it is closed — and is safe twice and before Serve. A Serve after Stop closes the
// listener and returns ErrStopped. The console's API, the server it answers with while it waits
// for Redis and every role's health endpoint are one of these.
type HTTP struct {
	// Name prefixes the errors Serve returns ("console http").
	Name string
	// OnFailure hears a server that stopped serving for another reason than a stop (nil: none).
	OnFailure func(error)

	svc     Base
	mu      sync.Mutex
	srv     *http.Server
	addr    string
	stopped bool
}

// Serve serves srv on ln until Stop; the HTTP owns ln from here on.
func (h *HTTP) Serve(ctx context.Context, ln net.Listener, srv *http.Server) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		ln.Close()
		return fmt.Errorf("%s: %w", h.Name, ErrStopped)
	}
	if err := h.svc.Run(ctx, func(ctx context.Context) {
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()
		var err error
		select {
		case err = <-served:
		case <-ctx.Done(): // Stop gave up on the graceful shutdown
			_ = srv.Close()
			err = <-served
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) && h.OnFailure != nil {
			h.OnFailure(err)
		}
	}); err != nil {
		ln.Close()
		return fmt.Errorf("%s: %w", h.Name, err)
	}
	h.srv, h.addr = srv, ln.Addr().String()
	return nil
}

// Addr is the address served ("" before Serve).
func (h *HTTP) Addr() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.addr
}

// Stopped reports whether Stop was called.
func (h *HTTP) Stopped() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stopped
}

// Stop shuts the server down gracefully within ctx, then closes it, and waits for it.
func (h *HTTP) Stop(ctx context.Context) {
	h.mu.Lock()
	h.stopped = true
	srv := h.srv
	h.mu.Unlock()
	if srv != nil {
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
		}
	}
	h.svc.Stop(ctx)
}
