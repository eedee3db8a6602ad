package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"plaita/control"
	"plaita/queue"
	"plaita/store"
	"plaita/store/sqlite"
)

// An error's problem is decided by its class and code alone: the sentinels of every package
// keep the status and code the API answered for them, whoever declared them.
func TestProblemForMapsTheClass(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		code   string
		retry  bool
	}{
		{fmt.Errorf("%w: acme", sqlite.ErrTenantNotFound), http.StatusNotFound, "tenant_not_found", false},
		{fmt.Errorf("%w: draft", sqlite.ErrDraftNotFound), http.StatusNotFound, "not_found", false},
		{store.ErrFlowNotFound, http.StatusNotFound, "not_found", false},
		{fmt.Errorf("%w: bad seq", sqlite.ErrBadCursor), http.StatusBadRequest, "invalid_cursor", false},
		{sqlite.ErrDefaultTenant, http.StatusBadRequest, "default_tenant", false},
		{store.ErrBadSchedule, http.StatusBadRequest, "invalid_request", false},
		{sqlite.ErrLoginTaken, http.StatusConflict, "login_taken", false},
		{sqlite.ErrDraftExists, http.StatusConflict, "exists", false},
		{sqlite.ErrTenantActive, http.StatusConflict, "tenant_active", false},
		{sqlite.ErrJobFinished, http.StatusConflict, "precondition_failed", false},
		{sqlite.ErrSessionInvalid, http.StatusUnauthorized, "unauthenticated", false},
		{&sqlite.LockedError{Login: "ann", Until: time.Now().Add(time.Minute)}, http.StatusTooManyRequests, "locked", true},
		{fmt.Errorf("%w: read: %w", sqlite.ErrDB, errors.New("disk I/O error")), http.StatusServiceUnavailable, "database_unavailable", true},
		{fmt.Errorf("%w: get: %w", store.ErrRedis, errors.New("connection refused")), http.StatusServiceUnavailable, "redis_unavailable", true},
		{store.ErrConflict, http.StatusServiceUnavailable, "redis_unavailable", true},
		{fmt.Errorf("%w: xlen: %w", queue.ErrRedis, errors.New("connection refused")), http.StatusServiceUnavailable, "redis_unavailable", true},
		{fmt.Errorf("list: %w", context.DeadlineExceeded), http.StatusServiceUnavailable, "redis_unavailable", true},
		{errNoRedis, http.StatusServiceUnavailable, "redis_unavailable", true},
		{store.ErrStateCorrupt, http.StatusInternalServerError, "internal", false},
		{errors.New("something else"), http.StatusInternalServerError, "internal", false},
		{&control.Refusal{Class: control.Stale, Code: "draft_changed", Message: "stale", Err: sqlite.ErrDraftChanged}, http.StatusPreconditionFailed, "draft_changed", false},
		{&control.Refusal{Class: control.NotFound, Code: "dead_letter_not_found", Message: "gone", Err: queue.ErrDLQEntryNotFound}, http.StatusNotFound, "dead_letter_not_found", false},
	} {
		p := problemFor(tc.err)
		if p.Status != tc.status || p.Code != tc.code || (p.RetryAfter > 0) != tc.retry {
			t.Errorf("%v: %d %s (retry after %d), want %d %s (retry %v)", tc.err, p.Status, p.Code, p.RetryAfter, tc.status, tc.code, tc.retry)
		}
	}
}
