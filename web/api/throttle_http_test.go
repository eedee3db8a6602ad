package api_test

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"plaita/store/sqlite"
	"plaita/test/webtest"
	"plaita/web/api"
)

// TestLoginThrottlePerAddress: one client address has Burst login attempts, then 429
// login_throttled with Retry-After — a right password too — audited as auth.login_failed
// (throttled); another address is not held back by it.
func TestLoginThrottlePerAddress(t *testing.T) {
	t.Parallel()
	f := webtest.New(t, webtest.WithSettings(func(s *api.Settings) { s.Login = api.LoginThrottle{Burst: 3, Every: time.Hour} }))
	if _, err := f.DB.CreateUser(context.Background(), sqlite.NewUser{Login: "ann", Password: "password-ann"}); err != nil {
		t.Fatal(err)
	}
	c := f.Client(nil)
	for i := range 2 { // 3 failures would lock the (login, network) pair: the throttle is what refuses below
		c.Want(t, http.StatusUnauthorized, http.MethodPost, "/api/login", map[string]string{"login": "ann", "password": "wrong-" + strconv.Itoa(i)})
	}
	c.Login(t, "ann", "password-ann")
	r := c.Want(t, http.StatusTooManyRequests, http.MethodPost, "/api/login", map[string]string{"login": "ann", "password": "password-ann"})
	if p := r.Problem(t); p.Code != "login_throttled" {
		t.Fatalf("throttled: %+v", p)
	}
	if secs, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || secs < 3000 || secs > 3600 {
		t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
	}
	if e, ok := f.Audited(t, "auth.login_failed"); !ok || e.Reason != "throttled" || e.IP != "127.0.0.1" {
		t.Fatalf("audit: %+v", e)
	}
	// Another address (the loopback network is all local): its own bucket.
	other := f.Client(nil)
	other.HC.Transport = &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}
	other.Login(t, "ann", "password-ann")
}

// TestLoginLockOutIsNeitherAWeaponNorAnOracle: failed logins from one network lock that login
// from that network only — its owner logs in from another — and a login that exists is
// answered exactly as one that does not, attempt after attempt.
func TestLoginLockOutIsNeitherAWeaponNorAnOracle(t *testing.T) {
	t.Parallel()
	f := webtest.New(t) // 3 failures lock a (login, network) pair
	ctx := context.Background()
	if _, _, err := f.DB.EnsureBootstrapAdmin(ctx, "admin", "the-right-password"); err != nil {
		t.Fatal(err)
	}
	attacker := f.ClientFrom("127.0.0.2", nil)
	for i := range 5 {
		attacker.Do(t, http.MethodPost, "/api/login", map[string]string{"login": "admin", "password": "guess-" + strconv.Itoa(i)})
	}
	if r := attacker.Do(t, http.MethodPost, "/api/login", map[string]string{"login": "admin", "password": "the-right-password"}); r.Status != http.StatusTooManyRequests {
		t.Fatalf("the attacker's network with the right password: %d, want 429", r.Status)
	}
	f.ClientFrom("127.0.0.3", nil).Login(t, "admin", "the-right-password") // the owner is not locked out

	answers := func(from, login string) []string {
		c := f.ClientFrom(from, nil)
		var out []string
		for i := range 6 {
			r := c.Do(t, http.MethodPost, "/api/login", map[string]string{"login": login, "password": "guess-" + strconv.Itoa(i)})
			p := r.Problem(t)
			out = append(out, strconv.Itoa(r.Status)+" "+p.Code+" "+p.Detail)
		}
		return out
	}
	known, unknown := answers("127.0.0.4", "admin"), answers("127.0.0.5", "nobody-by-this-name")
	if !slices.Equal(known, unknown) {
		t.Fatalf("an existing login is answered differently from an unknown one:\n%v\n%v", known, unknown)
	}
	if !strings.HasPrefix(known[len(known)-1], "429 login_throttled") {
		t.Fatalf("after 6 failures: %v", known)
	}
}
