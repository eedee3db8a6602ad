package store

import (
	"errors"
	"testing"

	"plaita/model"
)

// Every typed error and error helper of the package has the class of the sentinel it matches,
// wrapped or not (the sentinels themselves are checked with every other package's by the
// module's errors test, errors_test.go at the root).
func TestTypedErrorsHaveTheirSentinelsClass(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		is    error
		class model.Class
	}{
		{"LeaseHeldError", &LeaseHeldError{ExecutionID: "ex_1", Holder: "w"}, ErrLeaseHeld, model.Conflict},
		{"BadRecordError", &BadRecordError{ID: "w", Err: errors.New("bad json")}, ErrBadRecord, model.Invalid},
		{"StateTooLargeError", &StateTooLargeError{ExecutionID: "ex_1", Size: 2, Max: 1}, ErrStateTooLarge, model.Internal},
		{"CorruptStateError", &CorruptStateError{ID: "ex_1", Err: ErrStateCorrupt}, ErrStateCorrupt, model.Internal},
		{"a schedule error", schedErr(ErrBadSchedule, "cron %q", "x"), ErrBadSchedule, model.Invalid},
		{"a Redis failure", transient(ErrRedis, "read", errors.New("connection refused")), ErrRedis, model.Unavailable},
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
}
