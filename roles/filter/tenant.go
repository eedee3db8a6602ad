package filter

import (
	"context"
	"fmt"
	"strings"

	"plaita/store"
	"plaita/store/keys"
)

// tenantAdmits reads a tenant's status (every time: a re-enabled tenant is woken at the next
// pass, a disabled one is never sent a resume the worker would refuse) and says whether the
// worker would run a resume of it. The rule is the worker's status rule (roles/worker
// TenantStatus): "disabled" refuses; "active" or no entry admits; any other value refuses a
// non-default tenant and admits the default one. The worker's epoch gate only ever holds a
// message (it stays pending, nothing is lost), so it is not repeated here.
//
// A refused tenant's events are not delivered and the reconciler keeps its cursor: once the
// tenant is active again, the next reconcile pass wakes what its events match.
func tenantAdmits(ctx context.Context, st *store.Redis, tenant string) (bool, string, error) {
	r, err := st.ReadTenantStatus(ctx, tenant, false)
	if err != nil {
		return false, "", err
	}
	if tenant == "" {
		tenant = keys.DefaultTenant
	}
	status := strings.ToLower(strings.TrimSpace(r.Status))
	switch {
	case !r.Found || status == "active":
		return true, "", nil
	case status == "disabled":
		return false, fmt.Sprintf("tenant %q is disabled", tenant), nil
	case tenant == keys.DefaultTenant:
		return true, "", nil
	}
	return false, fmt.Sprintf("tenant %q has status %q (neither active nor disabled)", tenant, r.Status), nil
}
