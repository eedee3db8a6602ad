package sqlite

import (
	"errors"
	"testing"
	"time"

	"plaita/model"
	"plaita/store"
)

// Every typed error and error helper of the package has the class of the sentinel it matches,
// wrapped or not (the sentinels themselves are checked with every other package's by the
// module's errors test, errors_test.go at the root). A locked account matches
// ErrUnauthenticated, and its class is Limited: the console answers 429 with when to retry.
func TestTypedErrorsHaveTheirClass(t *testing.T) {
	until := time.Now().Add(time.Minute)
	for _, tc := range []struct {
		name  string
		err   error
		is    error
		class model.Class
	}{
		{"LockedError", &LockedError{Login: "ann", Until: until}, ErrUnauthenticated, model.Limited},
		{"DirtyError", &DirtyError{Version: 2, Cause: "x"}, ErrSchema, model.Internal},
		{"TooNewError", &TooNewError{Version: 9, Latest: 2}, ErrSchema, model.Internal},
		{"UnversionedError", &UnversionedError{Path: "/x", Tables: []string{"t"}}, ErrSchema, model.Internal},
		{"BehindError", &BehindError{Version: 1, Latest: 2}, ErrSchema, model.Internal},
		{"invalid", invalid("limit %d", -1), store.ErrInvalid, model.Invalid},
		{"a database failure", failed("read", errors.New("disk I/O error")), ErrDB, model.Unavailable},
		{"a unique violation without a class", dbErr("insert", errors.New("x"), ErrLoginTaken, nil), ErrDB, model.Unavailable},
	} {
		for _, err := range []error{tc.err, errors.Join(errors.New("context"), tc.err)} {
			if !errors.Is(err, tc.is) {
				t.Errorf("%s does not match %v", tc.name, tc.is)
			}
			if got := model.ClassOf(err); got != tc.class {
				t.Errorf("%s: class %v, want %v", tc.name, got, tc.class)
			}
			if model.IsTransient(err) != tc.class.Transient() {
				t.Errorf("%s: IsTransient %v", tc.name, model.IsTransient(err))
			}
		}
	}
	if got := model.CodeOf(&LockedError{Until: until}); got != "locked" {
		t.Errorf("a locked account's code is %q", got)
	}
	if got := (&LockedError{Until: until}).RetryAt(); !got.Equal(until) {
		t.Errorf("RetryAt %v, want %v", got, until)
	}
}

// A unique violation from SQLite itself becomes the class its caller names.
func TestConstraintViolationsAreClassed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := ctx(t)
	_, err := f.w.ExecContext(c, "INSERT INTO tenants (slug, name, status, status_epoch, created_at, updated_at) VALUES ('default', 'x', 'active', 1, 0, 0)")
	if err == nil {
		t.Fatal("no violation")
	}
	if got := dbErr("insert", err, ErrTenantExists, nil); !errors.Is(got, ErrTenantExists) || model.IsTransient(got) {
		t.Errorf("unique: %v", got)
	}
	_, err = f.w.ExecContext(c, "INSERT INTO memberships (user_id, tenant, role, created_at, updated_at) VALUES ('usr_x', 'default', 'admin', 0, 0)")
	if got := dbErr("insert", err, nil, ErrUserNotFound); !errors.Is(got, ErrUserNotFound) {
		t.Errorf("foreign key: %v (foreign keys on?)", got)
	}
}
