package sqlite

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"plaita/store"
)

// sentinels are every Err… variable of the package and whether it is transient.
var sentinels = map[string]struct {
	err       error
	transient bool
}{
	"ErrExists":            {ErrExists, false},
	"ErrPrecondition":      {ErrPrecondition, false},
	"ErrUnauthenticated":   {ErrUnauthenticated, false},
	"ErrSchema":            {ErrSchema, false},
	"ErrDB":                {ErrDB, true},
	"ErrTenantNotFound":    {ErrTenantNotFound, false},
	"ErrTenantExists":      {ErrTenantExists, false},
	"ErrTenantActive":      {ErrTenantActive, false},
	"ErrDefaultTenant":     {ErrDefaultTenant, false},
	"ErrUserNotFound":      {ErrUserNotFound, false},
	"ErrLoginTaken":        {ErrLoginTaken, false},
	"ErrBadCredentials":    {ErrBadCredentials, false},
	"ErrMemberNotFound":    {ErrMemberNotFound, false},
	"ErrSessionInvalid":    {ErrSessionInvalid, false},
	"ErrAPIKeyInvalid":     {ErrAPIKeyInvalid, false},
	"ErrAPIKeyNotFound":    {ErrAPIKeyNotFound, false},
	"ErrDraftNotFound":     {ErrDraftNotFound, false},
	"ErrDraftChanged":      {ErrDraftChanged, false},
	"ErrDraftExists":       {ErrDraftExists, false},
	"ErrVersionNotFound":   {ErrVersionNotFound, false},
	"ErrVersionExists":     {ErrVersionExists, false},
	"ErrJobNotFound":       {ErrJobNotFound, false},
	"ErrJobFinished":       {ErrJobFinished, false},
	"ErrJobLeased":         {ErrJobLeased, false},
	"ErrExecutionChanged":  {ErrExecutionChanged, false},
	"ErrBadCursor":         {ErrBadCursor, false},
	"ErrBadPasswordHash":   {ErrBadPasswordHash, false},
	"ErrBadURL":            {ErrBadURL, false},
	"ErrNoDatabase":        {ErrNoDatabase, false},
	"ErrMigrationNotFound": {ErrMigrationNotFound, false},
}

// Every sentinel and typed error of the package matches exactly one class, IsTransient says
// what that class is, and package store's IsTransient agrees (the console may use either);
// the list above names every Err… variable declared in the package, so a new one cannot skip
// a class.
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
		if store.IsTransient(err) != transient && !slices.Contains([]error{ErrExists, ErrPrecondition, ErrUnauthenticated, ErrSchema}, in[0]) {
			t.Errorf("store.IsTransient(%s) = %v, want %v", name, !transient, transient)
		}
	}
	for name, s := range sentinels {
		check(name, s.err, s.transient)
	}
	check("LockedError", &LockedError{Login: "ann", Until: time.Now()}, false)
	check("DirtyError", &DirtyError{Version: 2, Cause: "x"}, false)
	check("TooNewError", &TooNewError{Version: 9, Latest: 2}, false)
	check("UnversionedError", &UnversionedError{Path: "/x", Tables: []string{"t"}}, false)
	check("BehindError", &BehindError{Version: 1, Latest: 2}, false)
	check("invalid", invalid("limit %d", -1), false)
	check("a database failure", failed("read", errors.New("disk I/O error")), true)
	check("a unique violation without a class", dbErr("insert", errors.New("x"), ErrLoginTaken, nil), true)

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
			t.Errorf("%s is declared in package sqlite but not classed in this test", name)
		}
	}
	for name := range sentinels {
		if !declared[name] {
			t.Errorf("%s is listed here but not declared in package sqlite", name)
		}
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
	if got := dbErr("insert", err, ErrTenantExists, nil); !errors.Is(got, ErrTenantExists) || IsTransient(got) {
		t.Errorf("unique: %v", got)
	}
	_, err = f.w.ExecContext(c, "INSERT INTO memberships (user_id, tenant, role, created_at, updated_at) VALUES ('usr_x', 'default', 'admin', 0, 0)")
	if got := dbErr("insert", err, nil, ErrUserNotFound); !errors.Is(got, ErrUserNotFound) {
		t.Errorf("foreign key: %v (foreign keys on?)", got)
	}
}
