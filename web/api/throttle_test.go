package api

import (
	"strconv"
	"testing"
	"time"
)

// TestLoginBuckets: a bucket refills one attempt every Every up to Burst, says how long until
// the next one; an off guard refuses nothing.
func TestLoginBuckets(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	g := newLoginGuard(LoginThrottle{Burst: 2, Every: 10 * time.Second, MaxClients: 3}, func() time.Time { return now }, nil)
	take := func() (bool, time.Duration) {
		refused, wait := admit(t, g, "ann", "192.0.2.1")
		return refused == "", wait
	}
	for i := range 2 {
		if ok, _ := take(); !ok {
			t.Fatalf("attempt %d refused", i)
		}
	}
	if ok, wait := take(); ok || wait != 10*time.Second {
		t.Fatalf("third: %t %s", ok, wait)
	}
	now = now.Add(4 * time.Second)
	if ok, wait := take(); ok || wait != 6*time.Second {
		t.Fatalf("after 4 s: %t %s", ok, wait)
	}
	now = now.Add(6 * time.Second)
	if ok, _ := take(); !ok {
		t.Fatal("a token came back after 10 s, but it was refused")
	}
	now = now.Add(time.Hour) // refilled, never above Burst
	for i := range 3 {
		if ok, _ := take(); ok != (i < 2) {
			t.Fatalf("after an hour, attempt %d: %t", i, ok)
		}
	}
	if refused, _ := admit(t, newLoginGuard(LoginThrottle{Burst: 1, Off: true}, time.Now, nil), "x", "192.0.2.1"); refused != "" {
		t.Fatal("an off guard refused")
	}
}

// TestLoginGuardCountsNetworks: an IPv6 client is its /64 (changing the address within it gets
// no fresh bucket), an IPv4-mapped address is its IPv4 address.
func TestLoginGuardCountsNetworks(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"192.0.2.7": "192.0.2.7", "::ffff:192.0.2.7": "192.0.2.7",
		"2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64", "2001:db8:1:2:ffff:ffff:ffff:ffff": "2001:db8:1:2::/64",
		"fe80::1%eth0": "fe80::/64", "pipe": "pipe",
	} {
		if got := clientNetwork(in); got != want {
			t.Errorf("clientNetwork(%q) = %q, want %q", in, got, want)
		}
	}
	now := time.Unix(1000, 0)
	g := newLoginGuard(LoginThrottle{Burst: 2, Every: time.Hour}, func() time.Time { return now }, nil)
	for i := range 2 {
		if refused, _ := admit(t, g, "ann", "2001:db8:1:2::"+strconv.Itoa(i+1)); refused != "" {
			t.Fatalf("attempt %d refused", i)
		}
	}
	if refused, _ := admit(t, g, "ann", "2001:db8:1:2:aaaa::1"); refused != refusedThrottled {
		t.Fatalf("a third address of the same /64: %q, want throttled", refused)
	}
	if refused, _ := admit(t, g, "ann", "2001:db8:1:3::1"); refused != "" {
		t.Fatalf("another /64: %q", refused)
	}
}

// TestLoginGuardBoundedWithoutResets: the bucket table stays within MaxClients, and a client
// with state (an empty bucket) keeps it however many new clients come: the new ones share the
// overflow bucket instead of pushing an old one out.
func TestLoginGuardBoundedWithoutResets(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	g := newLoginGuard(LoginThrottle{Burst: 2, Every: time.Hour, MaxClients: 3}, func() time.Time { return now }, nil)
	admit(t, g, "ann", "192.0.2.1")
	admit(t, g, "ann", "192.0.2.1") // the bucket is empty
	for i := range 50 {
		admit(t, g, "x"+strconv.Itoa(i), "198.51.100."+strconv.Itoa(i+1))
		now = now.Add(2 * time.Second) // sweeps may run: nothing of the first client is inert
	}
	if n := len(g.buckets.m); n > 3 {
		t.Fatalf("%d buckets remembered, bound 3", n)
	}
	if refused, _ := admit(t, g, "bob", "192.0.2.1"); refused != refusedThrottled {
		t.Fatalf("the empty bucket after 50 new clients: %q, want throttled (it was reset)", refused)
	}
	if refused, _ := admit(t, g, "bob", "203.0.113.9"); refused != refusedThrottled {
		t.Fatalf("a new client while the table is full: %q, want throttled (the overflow bucket is used up)", refused)
	}
	// Once the first client's state is old, a sweep makes room again.
	now = now.Add(3 * time.Hour)
	if refused, _ := admit(t, g, "bob", "203.0.113.9"); refused != "" {
		t.Fatalf("after the state went stale: %q", refused)
	}
}

// admit is g.admit for a guard without a database (its failures are tested over HTTP on the
// console's real database: throttle_http_test.go).
func admit(t *testing.T, g *loginGuard, login, ip string) (string, time.Duration) {
	t.Helper()
	refused, wait, err := g.admit(t.Context(), login, ip)
	if err != nil {
		t.Fatal(err)
	}
	return refused, wait
}
