package store

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sentinels are every Err… variable of the package and whether it is transient.
var sentinels = map[string]struct {
	err       error
	transient bool
}{
	"ErrStateSerialization": {ErrStateSerialization, false},
	"ErrNotFound":           {ErrNotFound, false},
	"ErrStateTooLarge":      {ErrStateTooLarge, false},
	"ErrLeaseLost":          {ErrLeaseLost, false},
	"ErrStateCorrupt":       {ErrStateCorrupt, false},
	"ErrStateSave":          {ErrStateSave, true},
	"ErrStateLoad":          {ErrStateLoad, true},
	"ErrStateDelete":        {ErrStateDelete, true},
	"ErrRedis":              {ErrRedis, true},
	"ErrLeaseHeld":          {ErrLeaseHeld, false},
	"ErrInvalid":            {ErrInvalid, false},
	"ErrConflict":           {ErrConflict, true},
	"ErrEventNotFound":      {ErrEventNotFound, false},
	"ErrEventConflict":      {ErrEventConflict, false},
	"ErrBadEvent":           {ErrBadEvent, false},
	"ErrFlowNotFound":       {ErrFlowNotFound, false},
	"ErrVersionConflict":    {ErrVersionConflict, false},
	"ErrReservedFlowKey":    {ErrReservedFlowKey, false},
	"ErrScheduleNotFound":   {ErrScheduleNotFound, false},
	"ErrScheduleExists":     {ErrScheduleExists, false},
	"ErrBadSchedule":        {ErrBadSchedule, false},
	"ErrScheduleChanged":    {ErrScheduleChanged, true},
	"ErrBadRecord":          {ErrBadRecord, false},
	"ErrCorruptChanged":     {ErrCorruptChanged, false},
	"ErrStateChanged":       {ErrStateChanged, false},
	"ErrNotFresh":           {ErrNotFresh, true},
}

// Every sentinel of the package, and every typed error, matches exactly one class, and
// IsTransient says what that class is; the list above names every Err… variable declared in
// the package, so a new one cannot skip a class.
func TestEveryErrorHasExactlyOneClass(t *testing.T) {
	classes := slices.Concat(permanentClasses, transientClasses)
	check := func(name string, err error, transient bool) {
		t.Helper()
		var in []error
		for _, c := range classes {
			if errors.Is(err, c) {
				in = append(in, c)
			}
		}
		if len(in) != 1 {
			t.Errorf("%s matches %d classes %v, want exactly one", name, len(in), in)
		}
		if IsTransient(err) != transient {
			t.Errorf("IsTransient(%s) = %v, want %v", name, !transient, transient)
		}
		if wrapped := errors.Join(errors.New("context"), err); IsTransient(wrapped) != transient {
			t.Errorf("IsTransient of a wrapped %s = %v, want %v", name, !transient, transient)
		}
	}
	for name, s := range sentinels {
		check(name, s.err, s.transient)
	}
	check("LeaseHeldError", &LeaseHeldError{ExecutionID: "ex_1", Holder: "w"}, false)
	check("BadRecordError", &BadRecordError{ID: "w", Err: errors.New("bad json")}, false)
	check("StateTooLargeError", &StateTooLargeError{ExecutionID: "ex_1", Size: 2, Max: 1}, false)
	check("CorruptStateError", &CorruptStateError{ID: "ex_1", Err: ErrStateCorrupt}, false)
	check("a schedule error", schedErr(ErrBadSchedule, "cron %q", "x"), false)
	check("a Redis failure", transient(ErrRedis, "read", errors.New("connection refused")), true)

	declared := map[string]bool{}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					if strings.HasPrefix(n.Name, "Err") {
						declared[n.Name] = true
					}
				}
			}
		}
	}
	for name := range declared {
		if _, ok := sentinels[name]; !ok {
			t.Errorf("%s is declared in package store but not classed in this test", name)
		}
	}
	for name := range sentinels {
		if !declared[name] {
			t.Errorf("%s is listed here but not declared in package store", name)
		}
	}
}
