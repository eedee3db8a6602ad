package control

import (
	"context"
	"time"

	"plaita/store/sqlite"
)

// Several consoles on one database (docs/console.md, "Several consoles") each run the console's
// background work; what must run once across them — the periodic tenant-status reconcile, the
// engine sync — runs on the console that holds its lease in the database (console_leases). A
// holder renews its lease as it works and releases it when it drains; a console that dies
// leaves it to end, and another takes the work over at its next round.

// Names of the console's singletons.
const (
	SingletonTenantStatus = "tenant-status-reconcile"
	SingletonEngineSync   = "engine-sync"
)

// Singletons claims the console's singletons for one console (its instance id).
type Singletons struct {
	db     *sqlite.DB
	holder string
}

// NewSingletons are the singletons of the console holder on db.
func NewSingletons(db *sqlite.DB, holder string) *Singletons {
	return &Singletons{db: db, holder: holder}
}

// Hold claims (or renews) the lease of name for ttl: whether this console holds it, and who
// does.
func (s *Singletons) Hold(ctx context.Context, name string, ttl time.Duration) (bool, string, error) {
	l, held, err := s.db.ClaimLease(ctx, name, s.holder, ttl)
	return held, l.Holder, err
}

// Release hands the lease of name on, if this console holds it.
func (s *Singletons) Release(ctx context.Context, name string) error {
	return s.db.ReleaseLease(ctx, name, s.holder)
}
