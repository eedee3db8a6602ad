package sqlite

import "context"

// A read of an earlier version's local_executions beside Executions' storage contract: the
// tenants that have any (what the hand-over and local mode take up).

// Tenants are the tenants that have local executions, by slug.
func (x *Executions) Tenants(ctx context.Context) ([]string, error) {
	return queryAll(ctx, x.db.r, "list the tenants of local executions", "SELECT DISTINCT tenant FROM local_executions ORDER BY tenant", nil,
		func(s scanner) (string, error) {
			var t string
			err := s.Scan(&t)
			return t, err
		})
}
