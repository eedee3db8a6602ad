package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// How the database has been served (table console_served, migration 0004): the console
// records the mode it starts in, so that a later start knows whether the database has served
// with Redis. A console that finds Redis unreachable at its start runs local mode only on a
// database that never did (or when PLAITA_CONSOLE_LOCAL_FALLBACK allows it): local mode on a
// database that served with Redis answers starts that no worker and no cluster listing sees.

// ServedMode is a mode a console served the database in.
type ServedMode string

const (
	// ServedCluster: a console started on the database with Redis.
	ServedCluster ServedMode = "cluster"
	// ServedLocal: a console ran local mode on the database.
	ServedLocal ServedMode = "local"
)

// Served is the record of one mode: where it was served (the Redis URL, masked; the
// database's path for local mode) and when first and last.
type Served struct {
	Mode   ServedMode `json:"mode"`
	Detail string     `json:"detail,omitempty"`
	First  time.Time  `json:"first_at"`
	Last   time.Time  `json:"last_at"`
}

// MarkServed records that a console starts serving the database in mode (detail: where): the
// first time is kept, the last time and the detail move on.
func (db *DB) MarkServed(ctx context.Context, mode ServedMode, detail string) error {
	if mode != ServedCluster && mode != ServedLocal {
		return invalid("served mode %q: cluster or local", mode)
	}
	now := ms(db.now())
	_, err := db.w.ExecContext(ctx, "INSERT INTO console_served (mode, detail, first_at, last_at) VALUES (?, ?, ?, ?) "+
		"ON CONFLICT (mode) DO UPDATE SET detail = excluded.detail, last_at = excluded.last_at", string(mode), detail, now, now)
	if err != nil {
		return failed("record the console's mode", err)
	}
	return nil
}

// ServedIn reads the record of mode; ok is false when the database was never served in it.
func (db *DB) ServedIn(ctx context.Context, mode ServedMode) (s Served, ok bool, err error) {
	var first, last int64
	err = db.r.QueryRowContext(ctx, "SELECT mode, detail, first_at, last_at FROM console_served WHERE mode = ?", string(mode)).
		Scan(&s.Mode, &s.Detail, &first, &last)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Served{}, false, nil
	case err != nil:
		return Served{}, false, failed("read the console's modes", err)
	}
	s.First, s.Last = fromMS(first), fromMS(last)
	return s, true, nil
}
