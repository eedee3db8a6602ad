package schedule

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"plaita/store"
	"plaita/store/keys"
)

// ExecutionID is the execution id of a schedule's start for one tick: the same in every
// schedule process and for every retry or takeover of that tick, so a start enqueued twice is
// still one execution (the worker resumes the state the first delivery created). The
// schedule's creation time is part of it: a schedule deleted and created again under the same
// id never reuses an execution id of the old one.
func ExecutionID(tenant, scheduleID string, created, tick time.Time) string {
	if tenant == "" {
		tenant = keys.DefaultTenant
	}
	sum := sha256.Sum256([]byte("schedule\x00" + tenant + "\x00" + scheduleID + "\x00" +
		strconv.FormatInt(created.UnixMilli(), 10) + "\x00" + strconv.FormatInt(tick.UnixMilli(), 10)))
	return "ex_" + hex.EncodeToString(sum[:])[:24]
}

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
