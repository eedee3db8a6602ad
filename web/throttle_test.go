package web

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"plaita/store/sqlite"
)

// TestLoginThrottlePerAddress: one client address has Burst login attempts, then 429
// login_throttled with Retry-After — a right password too — audited as auth.login_failed
// (throttled); another address is not held back by it.
func TestLoginThrottlePerAddress(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withSettings(func(s *Settings) { s.Login = LoginThrottle{Burst: 3, Every: time.Hour} }))
	if _, err := f.db.CreateUser(context.Background(), sqlite.NewUser{Login: "ann", Password: "password-ann"}); err != nil {
		t.Fatal(err)
	}
	c := f.client(nil)
	for i := range 2 { // the fixture locks an account after 3 failures: the throttle is what refuses below
		c.want(t, http.StatusUnauthorized, http.MethodPost, "/api/login", map[string]string{"login": "ann", "password": "wrong-" + strconv.Itoa(i)})
	}
	c.login(t, "ann", "password-ann")
	r := c.want(t, http.StatusTooManyRequests, http.MethodPost, "/api/login", map[string]string{"login": "ann", "password": "password-ann"})
	if p := r.problem(t); p.Code != "login_throttled" {
		t.Fatalf("throttled: %+v", p)
	}
	if secs, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || secs < 3000 || secs > 3600 {
		t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
	}
	if e, ok := f.audited(t, "auth.login_failed"); !ok || e.Reason != "throttled" || e.IP != "127.0.0.1" {
		t.Fatalf("audit: %+v", e)
	}
	// Another address (the loopback network is all local): its own bucket.
	other := f.client(nil)
	other.hc.Transport = &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}
	other.login(t, "ann", "password-ann")
}

// TestLoginBuckets: a bucket refills one attempt every Every up to Burst, says how long until
// the next one, and the addresses remembered stay within MaxClients.
func TestLoginBuckets(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	b := newBuckets(LoginThrottle{Burst: 2, Every: 10 * time.Second, MaxClients: 3}, func() time.Time { return now })
	for i := range 2 {
		if ok, _ := b.take("a"); !ok {
			t.Fatalf("attempt %d refused", i)
		}
	}
	if ok, wait := b.take("a"); ok || wait != 10*time.Second {
		t.Fatalf("third: %t %s", ok, wait)
	}
	now = now.Add(4 * time.Second)
	if ok, wait := b.take("a"); ok || wait != 6*time.Second {
		t.Fatalf("after 4 s: %t %s", ok, wait)
	}
	now = now.Add(6 * time.Second)
	if ok, _ := b.take("a"); !ok {
		t.Fatal("a token came back after 10 s, but it was refused")
	}
	now = now.Add(time.Hour) // refilled, never above Burst
	for i := range 3 {
		if ok, _ := b.take("a"); ok != (i < 2) {
			t.Fatalf("after an hour, attempt %d: %t", i, ok)
		}
	}
	for _, addr := range []string{"b", "c", "d", "e"} {
		b.take(addr)
	}
	if n := len(b.m); n > 3 {
		t.Fatalf("%d addresses remembered, bound 3", n)
	}
	if ok, _ := (newBuckets(LoginThrottle{Burst: 1, Off: true}, time.Now)).take("x"); !ok {
		t.Fatal("an off throttle refused")
	}
}
