package store

import (
	"context"
	"slices"

	"plaita/store/keys"
)

// KnownTenants lists the tenants this deployment's Redis knows of, in slug order: the default
// tenant, those with a published status (the console publishes every tenant it has) and those
// that published an event. A tenant that is in neither — no console, no event — is not found
// here; operator commands take it by name (--tenant). Members that are no tenant slug are left
// out.
func (r *Redis) KnownTenants(ctx context.Context) ([]string, error) {
	sp, err := r.tenantSpace("")
	if err != nil {
		return nil, err
	}
	c, err := r.redis("the known tenants")
	if err != nil {
		return nil, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	res := c.DoMulti(ctx, c.B().Hkeys().Key(sp.TenantStatus()).Build(),
		c.B().Zrange().Key(sp.EventBusTenants()).Min("0").Max("-1").Build())
	out := []string{keys.DefaultTenant}
	for i, what := range []string{sp.TenantStatus(), sp.EventBusTenants()} {
		ts, err := res[i].AsStrSlice()
		if err != nil {
			return nil, transient(ErrRedis, "read "+what, err)
		}
		for _, t := range ts {
			if keys.ValidTenant(t) == nil && !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}
