package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Several consoles on one database (a PostgreSQL one behind a load balancer) share it; what
// must run on one of them at a time — a singleton — runs on the console that holds its lease,
// a row of console_leases (migration 0014). A lease is claimed for a time and renewed by its
// holder while it works; a console that dies leaves it to end, and the next claim takes it.

// Lease is the state of a singleton's lease.
type Lease struct {
	Name   string    `json:"name"`
	Holder string    `json:"holder"`
	Until  time.Time `json:"until"`
}

// ClaimLease claims the lease of name for holder until now+ttl: it is taken when it is free,
// ended or already holder's (a renewal). It returns the lease as it is after the claim and
// whether holder holds it.
func (db *DB) ClaimLease(ctx context.Context, name, holder string, ttl time.Duration) (Lease, bool, error) {
	if strings.TrimSpace(name) == "" || strings.TrimSpace(holder) == "" {
		return Lease{}, false, invalid("a lease needs a name and a holder")
	}
	if ttl <= 0 {
		return Lease{}, false, invalid("lease %s: the time must be positive, not %s", name, ttl)
	}
	var out Lease
	err := db.write(ctx, "claim the lease "+name, func(tx *sql.Tx) error {
		now := db.now()
		var holderNow string
		var until int64
		err := tx.QueryRowContext(ctx, "SELECT holder, until FROM console_leases WHERE name = ?", name).Scan(&holderNow, &until)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			_, err = tx.ExecContext(ctx, "INSERT INTO console_leases (name, holder, until) VALUES (?, ?, ?)", name, holder, ms(now.Add(ttl)))
		case err != nil:
		case holderNow == holder || until <= ms(now):
			_, err = tx.ExecContext(ctx, "UPDATE console_leases SET holder = ?, until = ? WHERE name = ?", holder, ms(now.Add(ttl)), name)
		default:
			out = Lease{Name: name, Holder: holderNow, Until: fromMS(until)}
			return nil
		}
		if err != nil {
			return failed("claim the lease "+name, err)
		}
		out = Lease{Name: name, Holder: holder, Until: now.Add(ttl)}
		return nil
	})
	if err != nil {
		return Lease{}, false, err
	}
	return out, out.Holder == holder, nil
}

// ReleaseLease ends holder's lease of name at once (a console that drains hands its
// singletons on); a lease holder does not hold is left as it is.
func (db *DB) ReleaseLease(ctx context.Context, name, holder string) error {
	if _, err := db.w.ExecContext(ctx, "DELETE FROM console_leases WHERE name = ? AND holder = ?", name, holder); err != nil {
		return failed(fmt.Sprintf("release the lease %s", name), err)
	}
	return nil
}
