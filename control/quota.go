package control

import (
	"context"
	"fmt"
	"time"

	"plaita/store/keys"
)

// The tenant running quota at the door. The worker admits a start by taking one of the
// tenant's running slots (roles/worker Quota) and defers it when the tenant is full; a start
// through the control plane is refused before it is enqueued when the tenant is full already,
// so a client hears "429, try later" instead of its start waiting unseen in the stream. Both
// read the limit with one rule, store.ResolveQuotaLimit. The check reads, it takes no slot: the
// worker's admission stays the one that counts (a burst of starts that all pass the check
// is deferred there), and a start enqueued but never run holds nothing.

// QuotaSettings are the running quota's knobs a front end passes in.
type QuotaSettings struct {
	// MaxRunning is PLAITA_TENANT_MAX_RUNNING, the limit of a tenant without an override
	// (≤ 0 = unlimited).
	MaxRunning int
}

// quotaRetryAfter is what a refused start is told to wait: a slot frees when one of the
// tenant's executions ends or suspends, which nothing here can foresee, so it is a polling
// interval, not a promise.
const quotaRetryAfter = 5 * time.Second

// QuotaState is a tenant's running slots against its limit.
type QuotaState struct {
	TenantID string     `json:"tenant_id"`
	Limit    QuotaLimit `json:"limit"`
	Running  int        `json:"running"`
	// Full: a start would wait for a slot (Limit.Limit > 0 and Running ≥ it).
	Full bool `json:"full"`
	// Source says where the limit comes from, for messages.
	Source string `json:"source"`
}

// QuotaLimit is a tenant's running limit and where it comes from.
type QuotaLimit struct {
	Limit int `json:"limit"` // 0 = unlimited
	// Override: the limit is the tenant's field in <root>:tenant_quota (Raw, as stored);
	// otherwise it is the deployment's default (PLAITA_TENANT_MAX_RUNNING).
	Override bool   `json:"override"`
	Raw      string `json:"raw,omitempty"`
	// Ignored says why an override makes the tenant unlimited ("0 or negative", "not an
	// integer"): it never falls back to the default.
	Ignored string `json:"ignored,omitempty"`
}

// Quota reads the tenant's limit and its running slots.
func (p *Plane) Quota(ctx context.Context, tenant string) (QuotaState, error) {
	tenant, err := p.Tenant(tenant)
	if err != nil {
		return QuotaState{}, err
	}
	l, err := p.d.Store.TenantQuotaLimit(ctx, tenant, p.d.Quota.MaxRunning)
	if err != nil {
		return QuotaState{}, fmt.Errorf("tenant quota of %s: %w", tenant, err)
	}
	out := QuotaState{TenantID: tenant, Limit: QuotaLimit(l), Source: fmt.Sprintf("PLAITA_TENANT_MAX_RUNNING=%d", max(p.d.Quota.MaxRunning, 0))}
	if l.Override {
		out.Source = fmt.Sprintf("%s[%s]=%q", keys.MustFor(p.d.Root, "").TenantQuota(), tenant, l.Raw)
	}
	if l.Limit == 0 {
		return out, nil // unlimited: the worker takes no slot either
	}
	if out.Running, err = p.d.Store.CountRunning(ctx, tenant, p.now()); err != nil {
		return QuotaState{}, fmt.Errorf("tenant quota of %s: %w", tenant, err)
	}
	out.Full = out.Running >= l.Limit
	return out, nil
}

// admitStart refuses a start of a tenant at its running limit (Limited, with the limit, the
// count and how to raise it).
func (p *Plane) admitStart(ctx context.Context, tenant string) error {
	q, err := p.Quota(ctx, tenant)
	if err != nil {
		return err
	}
	if !q.Full {
		return nil
	}
	key := keys.MustFor(p.d.Root, "").TenantQuota()
	return &Refusal{Class: Limited, Code: "tenant_quota", RetryAfter: quotaRetryAfter,
		Message: fmt.Sprintf("tenant %s runs %d execution(s), its limit (%s): a start waits for one of them to end or suspend", tenant, q.Running, q.Source),
		Unblock: fmt.Sprintf("retry later, or raise the tenant's limit: redis-cli HSET %s %s N", shellQuote(key), shellQuote(tenant)),
		Fields:  map[string]any{"limit": q.Limit.Limit, "running": q.Running, "source": q.Source, "override": q.Limit.Override}}
}
