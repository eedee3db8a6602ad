package sqlite

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Passwords are hashed with argon2id (golang.org/x/crypto/argon2.IDKey) and stored as PHC
// strings, which carry their own parameters, so the parameters can change without a
// migration: a hash made with other parameters still verifies, and is re-hashed with the
// current ones at the next successful login.
//
//	$argon2id$v=19$m=49152,t=2,p=1$<salt, base64 without padding>$<key, base64 without padding>

// PasswordParams are argon2id's parameters.
type PasswordParams struct {
	MemoryKiB uint32 // m
	Time      uint32 // t: passes over the memory
	Threads   uint8  // p
	SaltLen   uint32 // bytes of random salt
	KeyLen    uint32 // bytes of derived key
}

// DefaultPasswordParams are the parameters of new hashes: 48 MiB, 2 passes, 1 lane, a 16-byte
// salt and a 32-byte key. One verification takes 65–80 ms on the 2-core machine the console is
// sized for (the hash alone: 66–71 ms; BenchmarkVerifyPassword: 75–79 ms on the machine shared
// with other work; OWASP's floor is 19 MiB with 2 passes). One
// lane keeps a login from taking both cores; DefaultHashSlots bounds the memory of concurrent
// logins to 2 × 48 MiB.
func DefaultPasswordParams() PasswordParams {
	return PasswordParams{MemoryKiB: 48 * 1024, Time: 2, Threads: 1, SaltLen: 16, KeyLen: 32}
}

// Bounds of the parameters a hash may carry: a stored hash can never make a login take a
// gigabyte or a minute.
const (
	maxMemoryKiB = 1 << 20 // 1 GiB
	maxTime      = 32
	maxThreads   = 64
	minSalt      = 8
	maxSalt      = 64
	minKey       = 16
	maxKey       = 64
)

// Bounds of a password.
const (
	MinPasswordLen = 8    // bytes
	MaxPasswordLen = 1024 // bytes: argon2id takes any length; this bounds the request
)

func (p PasswordParams) validate() error {
	switch {
	case p.Threads < 1 || p.Threads > maxThreads:
		return invalid("argon2id threads %d: use 1 to %d", p.Threads, maxThreads)
	case p.MemoryKiB < 8*uint32(p.Threads) || p.MemoryKiB > maxMemoryKiB:
		return invalid("argon2id memory %d KiB: use %d to %d", p.MemoryKiB, 8*uint32(p.Threads), maxMemoryKiB)
	case p.Time < 1 || p.Time > maxTime:
		return invalid("argon2id time %d: use 1 to %d", p.Time, maxTime)
	case p.SaltLen < minSalt || p.SaltLen > maxSalt:
		return invalid("argon2id salt of %d bytes: use %d to %d", p.SaltLen, minSalt, maxSalt)
	case p.KeyLen < minKey || p.KeyLen > maxKey:
		return invalid("argon2id key of %d bytes: use %d to %d", p.KeyLen, minKey, maxKey)
	}
	return nil
}

// passwordHash is a parsed PHC string.
type passwordHash struct {
	params PasswordParams
	salt   []byte
	key    []byte
}

var b64 = base64.RawStdEncoding.Strict()

// encode writes the PHC string.
func (h passwordHash) encode() string {
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version,
		h.params.MemoryKiB, h.params.Time, h.params.Threads, b64.EncodeToString(h.salt), b64.EncodeToString(h.key))
}

// parsePasswordHash reads a PHC string this package wrote: argon2id, version 19, the m, t, p
// parameters in that order within bounds, salt and key in unpadded base64. Anything else,
// including a non-canonical spelling of the same values, is ErrBadPasswordHash.
func parsePasswordHash(s string) (passwordHash, error) {
	bad := func(why string) (passwordHash, error) {
		return passwordHash{}, fmt.Errorf("%w: %s", ErrBadPasswordHash, why)
	}
	if len(s) > 512 {
		return bad("too long")
	}
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[0] != "" {
		return bad("not a PHC string $argon2id$v=…$m=…,t=…,p=…$salt$key")
	}
	if parts[1] != "argon2id" {
		return bad("algorithm " + strconv.Quote(parts[1]) + ", not argon2id")
	}
	if parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return bad("version " + strconv.Quote(parts[2]) + ", not v=19")
	}
	var h passwordHash
	kv := strings.Split(parts[3], ",")
	if len(kv) != 3 {
		return bad("parameters are not m=…,t=…,p=…")
	}
	var vals [3]uint64
	for i, name := range []string{"m", "t", "p"} {
		v, ok := strings.CutPrefix(kv[i], name+"=")
		n, err := strconv.ParseUint(v, 10, 32)
		if !ok || err != nil {
			return bad("parameter " + strconv.Quote(kv[i]))
		}
		vals[i] = n
	}
	if vals[2] > maxThreads {
		return bad("p out of bounds")
	}
	h.params = PasswordParams{MemoryKiB: uint32(vals[0]), Time: uint32(vals[1]), Threads: uint8(vals[2])}
	var err error
	if h.salt, err = b64.DecodeString(parts[4]); err != nil {
		return bad("salt is not unpadded base64")
	}
	if h.key, err = b64.DecodeString(parts[5]); err != nil {
		return bad("key is not unpadded base64")
	}
	h.params.SaltLen, h.params.KeyLen = uint32(len(h.salt)), uint32(len(h.key))
	if err := h.params.validate(); err != nil {
		return bad(err.Error())
	}
	if h.encode() != s {
		return bad("not in canonical form")
	}
	return h, nil
}

// hashPassword hashes password with p under a new random salt.
func hashPassword(p PasswordParams, password string) string {
	salt := make([]byte, p.SaltLen)
	_, _ = rand.Read(salt) // never fails (crypto/rand)
	key := argon2.IDKey([]byte(password), salt, p.Time, p.MemoryKiB, p.Threads, p.KeyLen)
	return passwordHash{params: p, salt: salt, key: key}.encode()
}

// matches reports whether password derives h's key, comparing in constant time.
func (h passwordHash) matches(password string) bool {
	key := argon2.IDKey([]byte(password), h.salt, h.params.Time, h.params.MemoryKiB, h.params.Threads, h.params.KeyLen)
	return subtle.ConstantTimeCompare(key, h.key) == 1
}

// checkPassword applies the password bounds.
func checkPassword(password string) error {
	switch {
	case len(password) < MinPasswordLen:
		return invalid("the password is shorter than %d bytes", MinPasswordLen)
	case len(password) > MaxPasswordLen:
		return invalid("the password is longer than %d bytes", MaxPasswordLen)
	}
	return nil
}

// withHashSlot runs fn in one of the hashing slots, waiting for one (or for ctx).
func (db *DB) withHashSlot(ctx context.Context, fn func()) error {
	select {
	case db.hash <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("%w: waiting to hash a password: %w", ErrDB, ctx.Err())
	}
	defer func() { <-db.hash }()
	fn()
	return nil
}

// hash hashes password with the current parameters, in a hashing slot.
func (db *DB) hashPassword(ctx context.Context, password string) (string, error) {
	var out string
	err := db.withHashSlot(ctx, func() { out = hashPassword(db.opts.password, password) })
	return out, err
}

// dummyHash is a hash of nothing anyone knows, with the current parameters: an unknown login
// is verified against it, so it takes as long as a known one.
func (db *DB) dummyHash() passwordHash {
	db.dummyOnce.Do(func() { db.dummy = hashPassword(db.opts.password, rand.Text()) })
	h, _ := parsePasswordHash(db.dummy)
	return h
}
