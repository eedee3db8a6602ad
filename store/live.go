package store

import (
	"context"
	"fmt"
	"strings"

	"plaita/store/keys"
)

// LiveEvents publishes live events for the console's views: each execution's on its own channel
// (<prefix>execution_events:{<id>}), and the tenant's status changes on one channel
// (<prefix>execution_status) for the live executions list. Best effort: a lost message only
// thins a live view; the state is the record.
type LiveEvents struct {
	e    Ephemeral
	root string
}

// NewLiveEvents returns the publisher over e under root ("" = keys.DefaultRoot).
func NewLiveEvents(e Ephemeral, root string) *LiveEvents {
	if root == "" {
		root = keys.DefaultRoot
	}
	return &LiveEvents{e: e, root: root}
}

// Publish sends one event (JSON) on the execution's channel.
func (l *LiveEvents) Publish(ctx context.Context, tenant, executionID string, msg []byte) error {
	sp, err := keys.For(l.root, tenant)
	if err != nil {
		return err
	}
	channel, err := sp.ExecutionEvents(executionID)
	if err != nil {
		return err
	}
	return l.publish(ctx, channel, executionID, msg)
}

// PublishStatus sends one status change (JSON) on the tenant's status channel.
func (l *LiveEvents) PublishStatus(ctx context.Context, tenant, executionID string, msg []byte) error {
	sp, err := keys.For(l.root, tenant)
	if err != nil {
		return err
	}
	return l.publish(ctx, sp.ExecutionStatus(), executionID, msg)
}

func (l *LiveEvents) publish(ctx context.Context, channel, executionID string, msg []byte) error {
	if _, err := l.e.Publish(ctx, channel, msg); err != nil {
		return fmt.Errorf("publish live event of %s: %w", executionID, err)
	}
	return nil
}

// Watchers is who listens now.
type Watchers struct {
	// All is true when some client holds a pattern subscription (PUBSUB NUMPAT > 0 on a node):
	// Redis does not say which patterns, so every event may have a listener and is published.
	All        bool
	Executions map[string]struct{} // executions whose channel has a subscriber
	Tenants    map[string]struct{} // tenants whose status channel has a subscriber
}

// Execution reports whether an execution's events have a listener.
func (w Watchers) Execution(id string) bool {
	_, ok := w.Executions[id]
	return w.All || ok
}

// Tenant reports whether a tenant's status changes have a listener.
func (w Watchers) Tenant(tenant string) bool {
	_, ok := w.Tenants[tenant]
	return w.All || ok
}

// Listened reads who listens, on every node of a cluster (a subscription lives on the node it
// was made on), in one round trip per node. Publishing only to those spares a PUBLISH per event
// when nobody watches — the usual case.
func (l *LiveEvents) Listened(ctx context.Context) (Watchers, error) {
	w := Watchers{Executions: map[string]struct{}{}, Tenants: map[string]struct{}{}}
	root := l.root + ":"
	found, all, err := l.e.Listened(ctx, root+"*execution_events:*", root+"*execution_status")
	if err != nil {
		return Watchers{}, err
	}
	w.All = all
	for _, ch := range found[0] {
		if i := strings.LastIndexByte(ch, '{'); i >= 0 && strings.HasSuffix(ch, "}") {
			w.Executions[ch[i+1:len(ch)-1]] = struct{}{}
		}
	}
	for _, ch := range found[1] {
		if t, ok := statusTenant(root, ch); ok {
			w.Tenants[t] = struct{}{}
		}
	}
	return w, nil
}

// statusTenant is the tenant of a status channel: <root>:execution_status is the default
// tenant's, <root>:<tenant>:execution_status another's.
func statusTenant(root, channel string) (string, bool) {
	rest, ok := strings.CutSuffix(strings.TrimPrefix(channel, root), "execution_status")
	if !ok || !strings.HasPrefix(channel, root) {
		return "", false
	}
	if rest == "" {
		return keys.DefaultTenant, true
	}
	t, ok := strings.CutSuffix(rest, ":")
	if !ok || keys.ValidTenant(t) != nil {
		return "", false
	}
	return t, true
}
