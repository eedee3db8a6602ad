package model

import (
	"errors"
	"fmt"
	"testing"
)

// classedDetail is an error with details that decides its own class, as control.Refusal does.
type classedDetail struct{ cause error }

func (d *classedDetail) Error() string     { return "limited: " + d.cause.Error() }
func (d *classedDetail) Unwrap() error     { return d.cause }
func (d *classedDetail) ErrorClass() Class { return Limited }
func (d *classedDetail) ErrorCode() string { return "" }

func TestSentinelsMatchTheirKindsAndKeepOneClass(t *testing.T) {
	missing := New(NotFound, "", "not found")
	tenant := missing.Kind("tenant_not_found", "no such tenant")
	draft := missing.Kind("", "no such draft")
	exists := New(Conflict, "exists", "already exists")
	login := exists.Kind("", "login taken")
	down := New(Unavailable, "redis_unavailable", "redis call failed (transient)")

	for _, tc := range []struct {
		name      string
		err       error
		is        []error
		isNot     []error
		class     Class
		code      string
		transient bool
	}{
		{"a root", missing, []error{missing}, []error{tenant, exists}, NotFound, "not_found", false},
		{"a kind with its code", tenant, []error{tenant, missing}, []error{draft}, NotFound, "tenant_not_found", false},
		{"a kind without a code", draft, []error{draft, missing}, []error{tenant}, NotFound, "not_found", false},
		{"the code of the broader sentinel", login, []error{login, exists}, nil, Conflict, "exists", false},
		{"wrapped with %w", fmt.Errorf("%w: tenant acme", tenant), []error{tenant, missing}, nil, NotFound, "tenant_not_found", false},
		{"joined", errors.Join(errors.New("context"), login), []error{exists}, nil, Conflict, "exists", false},
		{"transient", fmt.Errorf("%w: xlen: %w", down, errors.New("connection refused")), []error{down}, nil, Unavailable, "redis_unavailable", true},
		{"a detail error decides its class", &classedDetail{cause: tenant}, []error{tenant, missing}, nil, Limited, "limited", true},
		{"the outermost class first", fmt.Errorf("%w: %w", down, tenant), []error{down, tenant}, nil, Unavailable, "redis_unavailable", true},
		{"no class", errors.New("dial tcp: connection refused"), nil, []error{missing, down}, Unknown, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, target := range tc.is {
				if !errors.Is(tc.err, target) {
					t.Errorf("errors.Is(%v, %v) = false", tc.err, target)
				}
			}
			for _, target := range tc.isNot {
				if errors.Is(tc.err, target) {
					t.Errorf("errors.Is(%v, %v) = true", tc.err, target)
				}
			}
			if got := ClassOf(tc.err); got != tc.class {
				t.Errorf("ClassOf = %v, want %v", got, tc.class)
			}
			if got := CodeOf(tc.err); got != tc.code {
				t.Errorf("CodeOf = %q, want %q", got, tc.code)
			}
			if got := IsTransient(tc.err); got != tc.transient {
				t.Errorf("IsTransient = %v, want %v", got, tc.transient)
			}
		})
	}
	if ClassOf(nil) != Unknown || CodeOf(nil) != "" || IsTransient(nil) {
		t.Error("nil has a class, a code or is transient")
	}
	if tenant.Error() != "no such tenant" {
		t.Errorf("message %q", tenant.Error())
	}
}

// Every class has a name, and exactly the classes that may pass later are transient.
func TestClasses(t *testing.T) {
	transient := map[Class]bool{Unknown: true, Unavailable: true, Limited: true}
	seen := map[string]bool{}
	for c := Unknown; c <= Internal; c++ {
		name := c.String()
		if name == "" || seen[name] {
			t.Errorf("class %d: name %q empty or taken", int(c), name)
		}
		seen[name] = true
		if c.Transient() != transient[c] {
			t.Errorf("%v.Transient() = %v", c, c.Transient())
		}
	}
	if Class(99).String() != "unknown" {
		t.Errorf("an undeclared class is named %q", Class(99).String())
	}
}
