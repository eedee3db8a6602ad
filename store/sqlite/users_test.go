package sqlite

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"plaita/store"
)

func TestUsers(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := ctx(t)
	ann := must[User](t)(f.CreateUser(c, NewUser{Login: "  Ann@Example.com ", Password: "correct horse"}))
	if ann.Login != "ann@example.com" || ann.Name != "ann@example.com" || ann.PlatformAdmin || !strings.HasPrefix(ann.ID, "usr_") {
		t.Fatalf("created: %+v", ann)
	}
	if got := must[User](t)(f.UserByLogin(c, "ANN@example.com")); got != ann {
		t.Errorf("by login: %+v", got)
	}
	if got := must[User](t)(f.User(c, ann.ID)); got != ann {
		t.Errorf("by id: %+v", got)
	}
	// The hash is a PHC argon2id string with the configured parameters, never the password.
	var stored string
	if err := f.r.QueryRow("SELECT password_hash FROM users WHERE id = ?", ann.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if h, err := parsePasswordHash(stored); err != nil || h.params != cheapPasswords || strings.Contains(stored, "correct horse") {
		t.Errorf("stored hash %q: %+v %v", stored, h, err)
	}

	_, err := f.CreateUser(c, NewUser{Login: "ANN@EXAMPLE.COM", Password: "another one"})
	wantErr(t, "a taken login, in other case", err, ErrExists, ErrLoginTaken)
	_, err = f.CreateUser(c, NewUser{Login: "bob", Password: "short"})
	wantErr(t, "a short password", err, store.ErrInvalid, nil)
	_, err = f.CreateUser(c, NewUser{Login: "bob", Password: strings.Repeat("x", MaxPasswordLen+1)})
	wantErr(t, "a long password", err, store.ErrInvalid, nil)
	for _, login := range []string{"", "a b", "tab\there", strings.Repeat("a", MaxLoginLen+1)} {
		_, err = f.CreateUser(c, NewUser{Login: login, Password: "correct horse"})
		wantErr(t, "login "+login, err, store.ErrInvalid, nil)
	}
	_, err = f.User(c, "usr_nobody")
	wantErr(t, "an unknown user", err, store.ErrNotFound, ErrUserNotFound)

	admin := must[User](t)(f.SetPlatformAdmin(c, ann.ID, true))
	if !admin.PlatformAdmin {
		t.Error("not admin")
	}
	_, err = f.SetPlatformAdmin(c, "usr_nobody", true)
	wantErr(t, "admin of an unknown user", err, store.ErrNotFound, ErrUserNotFound)

	must[User](t)(f.CreateUser(c, NewUser{Login: "bob", Name: "Bob", Password: "hunter2hunter2"}))
	p := must[Page[User]](t)(f.ListUsers(c, ListOptions{Limit: 1}))
	if len(p.Items) != 1 || p.Items[0].Login != "ann@example.com" || p.Next == "" {
		t.Fatalf("page 1: %+v", p)
	}
	p = must[Page[User]](t)(f.ListUsers(c, ListOptions{Cursor: p.Next, Limit: 1}))
	if len(p.Items) != 1 || p.Items[0].Login != "bob" || p.Next != "" {
		t.Fatalf("page 2: %+v", p)
	}

	if err := f.DeleteUser(c, ann.ID); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "delete again", f.DeleteUser(c, ann.ID), store.ErrNotFound, ErrUserNotFound)
}

func TestVerifyPassword(t *testing.T) {
	t.Parallel()
	f := setup(t, WithLockout(3, 10*time.Minute))
	c := ctx(t)
	ann := must[User](t)(f.CreateUser(c, NewUser{Login: "ann", Password: "correct horse"}))
	if u, err := f.VerifyPassword(c, "ANN", "correct horse"); err != nil || u.ID != ann.ID {
		t.Fatalf("right password: %+v %v", u, err)
	}
	// A wrong password, an unknown login and a malformed one all answer the same.
	for _, tc := range []struct{ login, password string }{{"ann", "Correct horse"}, {"nobody", "correct horse"}, {"a b", "x"}, {"ann", ""}} {
		_, err := f.VerifyPassword(c, tc.login, tc.password)
		if !errors.Is(err, ErrBadCredentials) || !errors.Is(err, ErrUnauthenticated) || err.Error() != ErrBadCredentials.Error() {
			t.Errorf("%q/%q: %v", tc.login, tc.password, err)
		}
	}
	// Two failures so far; a success clears them.
	if u := must[User](t)(f.User(c, ann.ID)); u.FailedLogins != 2 {
		t.Fatalf("failed logins %d", u.FailedLogins)
	}
	if u := must[User](t)(f.VerifyPassword(c, "ann", "correct horse")); u.FailedLogins != 0 {
		t.Errorf("a success left %d failed logins", u.FailedLogins)
	}
	// The third failure in a row locks the account; while locked, even the right password is
	// refused without being checked.
	for range 2 {
		if _, err := f.VerifyPassword(c, "ann", "wrong wrong"); !errors.Is(err, ErrBadCredentials) {
			t.Fatal(err)
		}
	}
	_, err := f.VerifyPassword(c, "ann", "wrong wrong")
	var le *LockedError
	if !errors.As(err, &le) || !le.Until.Equal(f.clock.Now().Add(10*time.Minute)) || !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("third failure: %v", err)
	}
	f.clock.Advance(9 * time.Minute)
	if _, err := f.VerifyPassword(c, "ann", "correct horse"); !errors.As(err, &le) {
		t.Fatalf("right password while locked: %v", err)
	}
	if u := must[User](t)(f.User(c, ann.ID)); !u.Locked(f.clock.Now()) || u.FailedLogins != 0 {
		t.Errorf("locked user: %+v", u)
	}
	// Once the period is over, the right password works and clears the lock.
	f.clock.Advance(time.Minute)
	u := must[User](t)(f.VerifyPassword(c, "ann", "correct horse"))
	if !u.LockedUntil.IsZero() || u.FailedLogins != 0 {
		t.Errorf("after the lock: %+v", u)
	}
	// An admin can unlock at once; a new password clears a lock too.
	for range 3 {
		_, _ = f.VerifyPassword(c, "ann", "wrong wrong")
	}
	must[User](t)(f.UnlockUser(c, ann.ID))
	must[User](t)(f.VerifyPassword(c, "ann", "correct horse"))
	for range 3 {
		_, _ = f.VerifyPassword(c, "ann", "wrong wrong")
	}
	must[User](t)(f.SetPassword(c, ann.ID, "battery staple"))
	must[User](t)(f.VerifyPassword(c, "ann", "battery staple"))
	if _, err := f.VerifyPassword(c, "ann", "correct horse"); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("the old password: %v", err)
	}
}

// Concurrent wrong passwords are all counted: the lock cannot be outrun.
func TestConcurrentFailedLoginsAreAllCounted(t *testing.T) {
	t.Parallel()
	f := setup(t, WithLockout(50, time.Hour), WithHashConcurrency(4))
	c := ctx(t)
	ann := must[User](t)(f.CreateUser(c, NewUser{Login: "ann", Password: "correct horse"}))
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := f.VerifyPassword(c, "ann", "wrong wrong"); !errors.Is(err, ErrBadCredentials) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if u := must[User](t)(f.User(c, ann.ID)); u.FailedLogins != 20 {
		t.Errorf("failed logins %d, want 20", u.FailedLogins)
	}
}

// A hash made with other parameters verifies, and is replaced by one with the current ones.
func TestPasswordParametersCanChange(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := ctx(t)
	ann := must[User](t)(f.CreateUser(c, NewUser{Login: "ann", Password: "correct horse"}))
	f.Close()
	stronger := cheapPasswords
	stronger.MemoryKiB, stronger.Time = 128, 2
	db := must[*DB](t)(Open(c, f.url, WithPasswordParams(stronger)))
	defer db.Close()
	must[User](t)(db.VerifyPassword(c, "ann", "correct horse"))
	var stored string
	if err := db.r.QueryRow("SELECT password_hash FROM users WHERE id = ?", ann.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if h, err := parsePasswordHash(stored); err != nil || h.params != stronger {
		t.Errorf("not re-hashed: %q %v", stored, err)
	}
	must[User](t)(db.VerifyPassword(c, "ann", "correct horse"))
	if _, err := Open(c, f.url, WithPasswordParams(PasswordParams{MemoryKiB: 1, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32})); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("parameters out of bounds: %v", err)
	}
}

func TestPasswordHashes(t *testing.T) {
	t.Parallel()
	enc := hashPassword(cheapPasswords, "correct horse")
	h, err := parsePasswordHash(enc)
	if err != nil || !h.matches("correct horse") || h.matches("correct horsE") || h.matches("") {
		t.Fatalf("%q: %v", enc, err)
	}
	if !strings.HasPrefix(enc, "$argon2id$v=19$m=64,t=1,p=1$") {
		t.Errorf("encoding %q", enc)
	}
	if enc == hashPassword(cheapPasswords, "correct horse") {
		t.Error("two hashes of one password are equal: no salt")
	}
	for _, bad := range []string{
		"", "plain", "$argon2i$v=19$m=64,t=1,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5a2V5",
		"$argon2id$v=16$m=64,t=1,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5a2V5",
		"$argon2id$v=19$t=1,m=64,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5a2V5",
		"$argon2id$v=19$m=064,t=1,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5a2V5",
		"$argon2id$v=19$m=99999999,t=1,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5a2V5",
		"$argon2id$v=19$m=64,t=1,p=1$c2FsdHNhbHQ=$a2V5a2V5a2V5a2V5a2V5a2V5",
		"$argon2id$v=19$m=64,t=1,p=1$c2FsdA$a2V5a2V5a2V5a2V5a2V5a2V5",
		enc + "$",
	} {
		if _, err := parsePasswordHash(bad); !errors.Is(err, ErrBadPasswordHash) || !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestEnsureBootstrapAdmin(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := ctx(t)
	_, _, err := f.EnsureBootstrapAdmin(c, "admin", "short")
	wantErr(t, "a short bootstrap password", err, store.ErrInvalid, nil)
	u, created, err := f.EnsureBootstrapAdmin(c, "admin", "correct horse")
	if err != nil || !created || !u.PlatformAdmin || u.Login != "admin" {
		t.Fatalf("first start: %+v %v %v", u, created, err)
	}
	// Any user at all, and the bootstrap does nothing: not another admin, not a new password.
	u, created, err = f.EnsureBootstrapAdmin(c, "admin", "another password")
	if err != nil || created || u.ID != "" {
		t.Fatalf("second start: %+v %v %v", u, created, err)
	}
	if _, _, err := f.EnsureBootstrapAdmin(c, "root", "correct horse"); err != nil || f.count("users") != 1 {
		t.Fatalf("another login: %v, %d users", err, f.count("users"))
	}
	must[User](t)(f.VerifyPassword(c, "admin", "correct horse"))

	// Concurrent first starts create one admin.
	g := setup(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	made := 0
	for range 4 {
		wg.Go(func() {
			_, created, err := g.EnsureBootstrapAdmin(c, "admin", "correct horse")
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if created {
				made++
			}
		})
	}
	wg.Wait()
	if made != 1 || g.count("users") != 1 {
		t.Errorf("%d admins made, %d users", made, g.count("users"))
	}
}
