package schedule

import (
	"context"
	"errors"

	"plaita/store"
)

// Executions answers Deps.Started from the execution storage: a state, a corrupt state or a
// deletion tombstone all mean the start was taken.
func Executions(r *store.Redis) func(ctx context.Context, tenant, executionID string) (bool, error) {
	return func(ctx context.Context, tenant, executionID string) (bool, error) {
		ts, err := r.Tenant(tenant)
		if err != nil {
			return false, err
		}
		_, err = ts.Load(ctx, executionID)
		switch {
		case err == nil, errors.Is(err, store.ErrStateCorrupt):
			return true, nil
		case !errors.Is(err, store.ErrNotFound):
			return false, err
		}
		return ts.Tombstoned(ctx, executionID)
	}
}
