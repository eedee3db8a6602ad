package sqlite

import (
	"errors"
	"strings"
	"testing"

	"plaita/store"
)

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

// The hash is a PHC argon2id string with the configured parameters, never the password.
func TestStoredPasswordHash(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := ctx(t)
	ann := must[User](t)(f.CreateUser(c, NewUser{Login: "ann", Password: "correct horse"}))
	var stored string
	if err := f.r.QueryRow("SELECT password_hash FROM users WHERE id = ?", ann.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if h, err := parsePasswordHash(stored); err != nil || h.params != cheapPasswords || strings.Contains(stored, "correct horse") {
		t.Errorf("stored hash %q: %+v %v", stored, h, err)
	}
}
