package store

import (
	"context"
	"time"

	"plaita/store/keys"
)

// TenantDriver is the storage of the tenant gates' state (tenant.go): the copy of the tenants'
// statuses with the console's deployment epoch, the per-tenant running-limit overrides and the
// running slots. The Redis driver (redisTenants) is the cluster's; store/sqlite's is local
// mode's; storetest's TenantContract holds both. sp is the tenant's key space; the platform's
// entries are under its root.
type TenantDriver interface {
	// Status reads the tenant's status entry and, with withEpoch, the epoch, in one round trip.
	Status(ctx context.Context, sp keys.Space, withEpoch bool) (TenantStatusRead, error)
	// StatusTenants lists the tenants that have a status entry.
	StatusTenants(ctx context.Context, sp keys.Space) ([]string, error)
	// WriteStatuses writes the statuses (tenant slug → status) and the epoch, in one round
	// trip.
	WriteStatuses(ctx context.Context, sp keys.Space, statuses map[string]string, epoch string) error
	// QuotaOverride reads the tenant's running-limit override as stored.
	QuotaOverride(ctx context.Context, sp keys.Space) (raw string, found bool, err error)
	// Admit prunes the tenant's slots expired at req.Now and takes or refreshes one, atomically
	// (AdmitRunning's rule).
	Admit(ctx context.Context, sp keys.Space, req RunningAdmit) (RunningAdmission, error)
	// Release frees a slot.
	Release(ctx context.Context, sp keys.Space, executionID string) error
	// CountRunning counts the slots alive after now.
	CountRunning(ctx context.Context, sp keys.Space, now time.Time) (int, error)
}
