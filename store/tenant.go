package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"plaita/store/keys"
)

// Tenant status and running quota (platform keys, store/keys). The console writes them; the
// worker reads the status before dispatching and takes a running slot before running a start.
//
//	<root>:tenant_status                HASH tenant → active|disabled (console: PublishTenantStatus,
//	                                    SyncTenantStatuses)
//	<root>:tenant_status:epoch          the console's PLAITA_DEPLOYMENT_EPOCH at its last write
//	<root>:tenant_quota                 HASH tenant → per-tenant running limit (override)
//	<root>:tenant_running:<tenant>      ZSET execution id → slot expiry (Unix ms)
//
// The read methods return raw values. What a status means is decided in one place,
// TenantStatusRead.Admits; what a 0 override or an epoch older than ours means is the worker's
// decision (roles/worker/tenant.go).

// TenantStatusRead is one read of a tenant's status entry and, when asked, of the epoch.
// Values are as stored (not trimmed).
type TenantStatusRead struct {
	// Status is the tenant's field in <root>:tenant_status; Found is false when it has none.
	Status string
	Found  bool
	// Epoch is <root>:tenant_status:epoch; EpochFound is false when the key is missing (or it
	// was not read).
	Epoch      string
	EpochFound bool
}

// Tenant status values in <root>:tenant_status, compared trimmed and case-insensitively.
const (
	TenantActive   = "active"
	TenantDisabled = "disabled"
)

// Admits is the tenant-status rule, the one every part that lets work of a tenant in decides
// with (the worker's gate, the filter, the schedule role, the console):
//
//   - no entry: admitted — a missing entry cannot be told apart from a deployment that never
//     published statuses, so the rule fails open;
//   - "active": admitted; "disabled": refused;
//   - any other value: refused for a tenant, admitted for the default tenant (fail-open, so a
//     typo in the console cannot stop every default-tenant execution).
//
// tenant is the tenant read ("" = default); why says which case decided, for logs, dead-letter
// details and skip records. The deployment-epoch gate (roles/worker TenantStatus) is not part
// of the rule: it only ever holds work back while the snapshot is not proven current.
func (r TenantStatusRead) Admits(tenant string) (ok bool, why string) {
	if tenant == "" {
		tenant = keys.DefaultTenant
	}
	switch st := r.status(); {
	case !r.Found:
		return true, fmt.Sprintf("tenant %q has no status entry: active (fail-open)", tenant)
	case st == TenantActive:
		return true, fmt.Sprintf("tenant %q is active", tenant)
	case st == TenantDisabled:
		return false, fmt.Sprintf("tenant %q is disabled", tenant)
	case tenant == keys.DefaultTenant:
		return true, fmt.Sprintf("default tenant has unknown status %q: fail-open", r.Status)
	}
	return false, fmt.Sprintf("tenant %q has status %q (neither active nor disabled): refused", tenant, r.Status)
}

// Unknown reports whether the entry holds a value that is neither active nor disabled (the
// default tenant is admitted with it; callers warn about it).
func (r TenantStatusRead) Unknown() bool {
	st := r.status()
	return r.Found && st != TenantActive && st != TenantDisabled
}

func (r TenantStatusRead) status() string { return strings.ToLower(strings.TrimSpace(r.Status)) }

// TenantAdmits reads the tenant's status entry (not the epoch) and applies the rule (Admits):
// for the processes that produce work of a tenant and keep no cache (the filter, the schedule
// role). An error is ReadTenantStatus's.
func (r *Redis) TenantAdmits(ctx context.Context, tenant string) (ok bool, why string, err error) {
	read, err := r.ReadTenantStatus(ctx, tenant, false)
	if err != nil {
		return false, "", err
	}
	ok, why = read.Admits(tenant)
	return ok, why, nil
}

// tenantSpace is the key space of tenant ("" = default) under the store's root. A tenant's
// field in the platform HASHes is its slug, "default" for the default tenant.
func (r *Redis) tenantSpace(tenant string) (keys.Space, error) {
	return keys.For(r.root, tenant)
}

// ReadTenantStatus reads the tenant's status entry and, with withEpoch, the epoch key, in one
// round trip (two keys in two slots: pipelined, not atomic — a status written between the two
// reads is seen with the epoch before or after it, which the next dispatch corrects). An
// invalid slug matches keys.ErrBadTenant; a Redis failure is ErrRedis.
func (r *Redis) ReadTenantStatus(ctx context.Context, tenant string, withEpoch bool) (TenantStatusRead, error) {
	sp, err := r.tenantSpace(tenant)
	if err != nil {
		return TenantStatusRead{}, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return r.t.Status(ctx, sp, withEpoch)
}

// PublishTenantStatus writes one tenant's status (active or disabled) into <root>:tenant_status
// and the console's deployment epoch into <root>:tenant_status:epoch, in one round trip (two
// keys in two slots: pipelined, not atomic; a worker that reads between the two sees the
// status with the epoch before, which its next read corrects). It is the console's write when
// a tenant is created, enabled or disabled; the console's database is the authority and this
// is its copy. Any other status, or an empty epoch, is ErrInvalid; a Redis failure is ErrRedis.
func (r *Redis) PublishTenantStatus(ctx context.Context, tenant, status, epoch string) error {
	return r.writeTenantStatuses(ctx, map[string]string{tenant: status}, epoch)
}

// TenantStatusSync is what SyncTenantStatuses wrote.
type TenantStatusSync struct {
	// Published are the tenants whose status the authority gave, by slug.
	Published []string `json:"published"`
	// Tombstoned are the tenants Redis had an entry for that the authority does not know (a
	// tenant deleted, or an entry a Redis-only restore brought back): written disabled.
	Tombstoned []string `json:"tombstoned"`
}

// SyncTenantStatuses publishes the authority's statuses (tenant → active|disabled: every
// tenant the console's database has) and the epoch. A non-default tenant that has an entry in
// Redis but none in the authority becomes a disabled tombstone: a restore that brings a
// deleted tenant's "active" back must not re-admit it. The default tenant is never
// tombstoned (it always exists), and a tenant missing from both stays missing: the worker
// admits a tenant without an entry (fail-open, TenantStatusRead.Admits), which cannot be
// told apart from a deployment that never published. An empty epoch or a status other than
// active and disabled is ErrInvalid; a Redis failure is ErrRedis (nothing may have been
// written, or some of it: a later sync writes it all again).
func (r *Redis) SyncTenantStatuses(ctx context.Context, authority map[string]string, epoch string) (TenantStatusSync, error) {
	sp, err := r.tenantSpace("")
	if err != nil {
		return TenantStatusSync{}, err
	}
	octx, cancel := opCtx(ctx)
	published, err := r.t.StatusTenants(octx, sp)
	cancel()
	if err != nil {
		return TenantStatusSync{}, err
	}
	writes := make(map[string]string, len(authority)+len(published))
	var out TenantStatusSync
	for tenant, status := range authority {
		field, err := r.tenantSpace(tenant)
		if err != nil {
			return TenantStatusSync{}, err
		}
		writes[field.Tenant()] = status
		out.Published = append(out.Published, field.Tenant())
	}
	for _, tenant := range published {
		if _, known := writes[tenant]; known || tenant == keys.DefaultTenant {
			continue
		}
		writes[tenant] = TenantDisabled
		out.Tombstoned = append(out.Tombstoned, tenant)
	}
	slices.Sort(out.Published)
	slices.Sort(out.Tombstoned)
	if err := r.writeTenantStatuses(ctx, writes, epoch); err != nil {
		return TenantStatusSync{}, err
	}
	return out, nil
}

// writeTenantStatuses checks and writes the statuses and the epoch (TenantDriver.WriteStatuses).
func (r *Redis) writeTenantStatuses(ctx context.Context, statuses map[string]string, epoch string) error {
	if strings.TrimSpace(epoch) == "" {
		return fmt.Errorf("%w: an empty deployment epoch", ErrInvalid)
	}
	sp, err := r.tenantSpace("")
	if err != nil {
		return err
	}
	fields := make(map[string]string, len(statuses))
	for _, tenant := range slices.Sorted(maps.Keys(statuses)) {
		st := statuses[tenant]
		field, err := r.tenantSpace(tenant)
		if err != nil {
			return err
		}
		if st != TenantActive && st != TenantDisabled {
			return fmt.Errorf("%w: tenant %q status %q: use %s or %s", ErrInvalid, field.Tenant(), st, TenantActive, TenantDisabled)
		}
		fields[field.Tenant()] = st
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return r.t.WriteStatuses(ctx, sp, fields, epoch)
}

// TenantQuotaOverride reads the tenant's field in <root>:tenant_quota; found is false when it
// has none. The value is as stored: parsing it is the caller's decision.
func (r *Redis) TenantQuotaOverride(ctx context.Context, tenant string) (raw string, found bool, err error) {
	sp, err := r.tenantSpace(tenant)
	if err != nil {
		return "", false, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return r.t.QuotaOverride(ctx, sp)
}

// QuotaLimit is a tenant's effective running limit and where it came from: the one rule the
// worker's admission and the console's start check apply (ResolveQuotaLimit).
type QuotaLimit struct {
	Limit int `json:"limit"` // 0 = unlimited
	// Override: the limit is the tenant's field in <root>:tenant_quota (Raw, as stored);
	// otherwise it is the deployment's default (PLAITA_TENANT_MAX_RUNNING).
	Override bool   `json:"override"`
	Raw      string `json:"raw,omitempty"`
	// Ignored says why an override makes the tenant unlimited ("0 or negative", "not an
	// integer"): it never falls back to the default; callers warn about it.
	Ignored string `json:"ignored,omitempty"`
}

// ResolveQuotaLimit is the running-limit rule: the tenant's override when it has one (a
// positive integer, spaces trimmed; 0, negative or not an integer = unlimited for that tenant,
// never the default), otherwise def (≤ 0 = unlimited).
func ResolveQuotaLimit(raw string, found bool, def int) QuotaLimit {
	if !found {
		return QuotaLimit{Limit: max(def, 0)}
	}
	l := QuotaLimit{Override: true, Raw: raw}
	n, err := strconv.Atoi(strings.TrimSpace(raw))
	switch {
	case err != nil:
		l.Ignored = "not an integer"
	case n <= 0:
		l.Ignored = "0 or negative"
	default:
		l.Limit = n
	}
	return l
}

// TenantQuotaLimit reads the tenant's override and applies the rule (ResolveQuotaLimit) with
// def, the deployment's default limit.
func (r *Redis) TenantQuotaLimit(ctx context.Context, tenant string, def int) (QuotaLimit, error) {
	raw, found, err := r.TenantQuotaOverride(ctx, tenant)
	if err != nil {
		return QuotaLimit{}, err
	}
	return ResolveQuotaLimit(raw, found, def), nil
}

// RunningAdmit asks for a running slot of one execution.
type RunningAdmit struct {
	Tenant      string // "" = default
	ExecutionID string
	// Now is the clock of the slot scores: slots that expired at Now are pruned first.
	Now time.Time
	// TTL is how long the slot lives (its expiry is Now+TTL) and the ZSET key's TTL, so a
	// crashed worker's slot frees itself and an idle tenant leaves no key behind.
	TTL time.Duration
	// Limit is the tenant's limit; ≤ 0 = unlimited (the slot is still recorded, so a limit
	// set later sees the true count).
	Limit int
	// Force adds the slot even when the tenant is at its limit.
	Force bool
}

// RunningAdmission is AdmitRunning's answer.
type RunningAdmission struct {
	// Admitted: the execution holds a slot now (a new one, or its own refreshed).
	Admitted bool
	// Running is the tenant's slot count after the call (at a refusal: the count that refused).
	Running int
	// Over: the slot was added over the limit (Force).
	Over bool
}

// AdmitRunning prunes the tenant's expired slots, then takes one for the execution when it is
// under the limit (or Force), atomically. An execution that already holds a slot keeps it and
// its expiry is refreshed (a redelivered start). A request without execution id or with a TTL
// under a millisecond is ErrInvalid; a Redis failure is ErrRedis.
func (r *Redis) AdmitRunning(ctx context.Context, req RunningAdmit) (RunningAdmission, error) {
	sp, err := r.tenantSpace(req.Tenant)
	if err != nil {
		return RunningAdmission{}, err
	}
	ttl := req.TTL.Milliseconds()
	if req.ExecutionID == "" || ttl < 1 {
		return RunningAdmission{}, fmt.Errorf("%w: running slot of execution %q with TTL %s", ErrInvalid, req.ExecutionID, req.TTL)
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return r.t.Admit(ctx, sp, req)
}

// ReleaseRunning frees the execution's slot. Idempotent: a slot that expired or was never
// taken is fine.
func (r *Redis) ReleaseRunning(ctx context.Context, tenant, executionID string) error {
	sp, err := r.tenantSpace(tenant)
	if err != nil {
		return err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return r.t.Release(ctx, sp, executionID)
}

// CountRunning counts the tenant's slots that have not expired at now (expired ones are left
// for the next admission to prune: a count is a read).
func (r *Redis) CountRunning(ctx context.Context, tenant string, now time.Time) (int, error) {
	sp, err := r.tenantSpace(tenant)
	if err != nil {
		return 0, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return r.t.CountRunning(ctx, sp, now)
}
