package sqlite

import (
	"fmt"
	"testing"
)

// BenchmarkVerifyPassword is the login cost: one VerifyPassword of a right password with the
// default argon2id parameters (DefaultPasswordParams), lookup included.
func BenchmarkVerifyPassword(b *testing.B) {
	f := setup(b, WithPasswordParams(DefaultPasswordParams()))
	c := ctx(b)
	if _, err := f.CreateUser(c, NewUser{Login: "ann", Password: "correct horse battery"}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := f.VerifyPassword(c, "ann", "correct horse battery"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendAudit is one allowed audit row (one write transaction on the WAL file).
func BenchmarkAppendAudit(b *testing.B) {
	f := setup(b)
	c := ctx(b)
	i := 0
	for b.Loop() {
		i++
		if _, err := f.AppendAudit(c, AuditEntry{Actor: "ann", ActorKind: ActorUser, Tenant: "acme", Action: "flow.save",
			Target: fmt.Sprint("flow-", i), Outcome: OutcomeAllow, IP: "10.0.0.1", RequestID: "req"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendAuditDenied is a denial coalesced into the row of its key (a flood's cost).
func BenchmarkAppendAuditDenied(b *testing.B) {
	f := setup(b)
	c := ctx(b)
	for b.Loop() {
		if _, err := f.AppendAudit(c, denial("flow.publish.denied", "role")); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendAuditParallel is allowed audit rows from concurrent request handlers.
func BenchmarkAppendAuditParallel(b *testing.B) {
	f := setup(b)
	c := ctx(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := f.AppendAudit(c, AuditEntry{Actor: "ann", ActorKind: ActorUser, Tenant: "acme", Action: "flow.save", Outcome: OutcomeAllow}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func denial(action, reason string) AuditEntry {
	return AuditEntry{Actor: "ann", ActorKind: ActorUser, Tenant: "acme", Action: action, Outcome: OutcomeDeny, Reason: reason, IP: "10.0.0.1"}
}
