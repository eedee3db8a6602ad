package schedule

import (
	"context"

	"plaita/store"
)

// Tenants is the TenantGate over the tenant-status keys, by the rule the worker admits work
// with (store.TenantStatusRead.Admits): an admitted tenant's ticks fire, a refused tenant's
// are skipped. A failed read keeps the tick due (Hold with the error). The worker's epoch gate
// is not applied: PLAITA_DEPLOYMENT_EPOCH is the worker's and the console's, and the worker
// still holds a start that a stale snapshot let through.
func Tenants(r *store.Redis) TenantGate { return tenantStatus{r} }

type tenantStatus struct{ r *store.Redis }

func (t tenantStatus) Check(ctx context.Context, tenant string) (Verdict, string, error) {
	ok, why, err := t.r.TenantAdmits(ctx, tenant)
	switch {
	case err != nil:
		return Hold, "", err
	case !ok:
		return Skip, why, nil
	}
	return Fire, why, nil
}
