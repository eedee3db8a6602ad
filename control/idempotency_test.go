package control

import "testing"

// The id of a key is what the console derived before StartOnce held it: keys already given to
// the API name the same executions after an upgrade.
func TestIdempotentIDIsStable(t *testing.T) {
	if got, want := IdempotentID("default", "order-42"), "ex_"; got[:3] != want || len(got) != 27 {
		t.Fatalf("IdempotentID = %q", got)
	}
	if IdempotentID("default", "k") == IdempotentID("acme", "k") || IdempotentID("default", "k") == IdempotentID("default", "k2") {
		t.Fatal("two (tenant, key) pairs name one execution")
	}
	// sha256("plaita-idempotency\x00default\x00order-42"), its first 12 bytes in hex: the
	// formula the console used.
	if got := IdempotentID("default", "order-42"); got != "ex_83cda885beb3691a8037aa1a" {
		t.Fatalf("IdempotentID(default, order-42) = %s: keys given before name other executions now", got)
	}
}
