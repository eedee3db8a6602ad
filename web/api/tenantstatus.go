package api

import (
	"context"

	"plaita/control"
)

// TenantStatusReport is one tenant-status reconcile (control/tenantstatus.go).
type TenantStatusReport = control.TenantStatusReport

// Triggers of a reconcile.
const (
	TriggerStart    = control.TriggerStart
	TriggerPeriodic = control.TriggerPeriodic
	TriggerAPI      = control.TriggerAPI
)

// ReconcileTenantStatuses publishes every tenant's status from the database, once; the report
// is also the one /health shows next.
func (a *API) ReconcileTenantStatuses(ctx context.Context, trigger string) (TenantStatusReport, error) {
	return a.d.Accounts.ReconcileTenantStatuses(ctx, trigger)
}
