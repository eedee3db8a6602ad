package roles

import "context"

// Hooks are what a test hears of the roles it runs in process (test/e2e's default build runs
// the role bodies of the binary as goroutines): the signals that stand in for a probe of
// /readyz. A binary sets none; a role reads them from the context it runs with (WithHooks).
type Hooks struct {
	// Ready hears a role once it is ready: the console once it serves, a worker once it
	// consumes, the filter once it is subscribed.
	Ready func(ReadyRole)
}

// ReadyRole is a role that became ready: its name, and the address it serves its callers on
// (the console's API; another role's metrics endpoint, "" when that is off).
type ReadyRole struct {
	Role string
	Addr string
}

type hooksKey struct{}

// WithHooks is ctx carrying h, for a role body run with it.
func WithHooks(ctx context.Context, h Hooks) context.Context {
	return context.WithValue(ctx, hooksKey{}, h)
}

func hooksOf(ctx context.Context) Hooks {
	h, _ := ctx.Value(hooksKey{}).(Hooks)
	return h
}
