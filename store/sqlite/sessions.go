package sqlite

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Sessions and API keys are stored by the sha256 of their secret: the secret is returned once,
// when it is made, and a copy of the database authenticates nobody.

// Fingerprint is the short public name of a secret (a session token, an API key, the admin
// API key): the first 16 hex digits of its sha256, for logs and audit rows (the key_fingerprint
// of an audit row, docs/console.md "Audit"). Keys and sessions made before it was 16 keep the
// 12 digits they were stored with: the first 12 of these.
func Fingerprint(secret string) string { return secretHash(secret)[:FingerprintLen] }

// FingerprintLen is how many hex digits of the sha256 a Fingerprint has.
const FingerprintLen = 16

func secretHash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// newSecret is 256 random bits as 52 lower-case base32 characters.
func newSecret() string { return strings.ToLower(rand.Text() + rand.Text()) }

// lastSeenEvery is how stale last_seen_at (and an API key's last_used_at) may get: a request
// updates it only when it is older, so reads stay reads.
const lastSeenEvery = time.Minute

// sessionPrefix starts every session token.
const sessionPrefix = "pls_"

// Session is one login session. ID is the token's fingerprint: it names the session without
// being able to use it.
type Session struct {
	ID         string    `json:"id"`
	UserID     string    `json:"user_id"`
	CreatedAt  time.Time `json:"created_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	LastSeenAt time.Time `json:"last_seen_at"`
	IP         string    `json:"ip,omitempty"`
	UserAgent  string    `json:"user_agent,omitempty"`
}

// CreateSession starts a session of a user for ttl (ttl <= 0: DefaultSessionMaxAge) and returns
// its token, once: only its sha256 is stored. The token is "pls_" and 52 base32 characters.
func (db *DB) CreateSession(ctx context.Context, userID string, ttl time.Duration, meta SessionMeta) (string, Session, error) {
	if ttl <= 0 {
		ttl = DefaultSessionMaxAge
	}
	token := sessionPrefix + newSecret()
	now := db.now()
	s := Session{ID: Fingerprint(token), UserID: userID, CreatedAt: now, ExpiresAt: now.Add(ttl), LastSeenAt: now,
		IP: cut(meta.IP, 64), UserAgent: cut(meta.UserAgent, 512)}
	_, err := db.w.ExecContext(ctx,
		"INSERT INTO sessions (token_hash, user_id, created_at, expires_at, last_seen_at, ip, user_agent) VALUES (?, ?, ?, ?, ?, ?, ?)",
		secretHash(token), userID, ms(now), ms(s.ExpiresAt), ms(now), s.IP, s.UserAgent)
	if err != nil {
		return "", Session{}, dbErr("create a session", err, nil, fmt.Errorf("%w: id %s", ErrUserNotFound, userID))
	}
	return token, s, nil
}

// cut keeps the first n bytes of s, on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// LookupSession authenticates a session token: the session and its user. An unknown token and
// an expired session (deleted on the way) are ErrSessionInvalid. The session's last_seen_at
// moves at most once a minute. Whether the user may act in a tenant is the memberships' to say
// (Membership, UserMemberships: a disabled tenant's status is there).
func (db *DB) LookupSession(ctx context.Context, token string) (Session, User, error) {
	if !strings.HasPrefix(token, sessionPrefix) || len(token) != len(sessionPrefix)+52 {
		return Session{}, User{}, ErrSessionInvalid
	}
	hash := secretHash(token)
	var s Session
	var u User
	var created, expires, seen, locked, uCreated, uUpdated int64
	err := db.r.QueryRowContext(ctx,
		"SELECT s.user_id, s.created_at, s.expires_at, s.last_seen_at, s.ip, s.user_agent, "+
			"u.id, u.login, u.display_name, u.platform_admin, u.failed_logins, u.locked_until, u.created_at, u.updated_at "+
			"FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.token_hash = ?", hash).
		Scan(&s.UserID, &created, &expires, &seen, &s.IP, &s.UserAgent,
			&u.ID, &u.Login, &u.Name, &u.PlatformAdmin, &u.FailedLogins, &locked, &uCreated, &uUpdated)
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, User{}, ErrSessionInvalid
	}
	if err != nil {
		return Session{}, User{}, failed("read a session", err)
	}
	s.ID, s.CreatedAt, s.ExpiresAt, s.LastSeenAt = hash[:FingerprintLen], fromMS(created), fromMS(expires), fromMS(seen)
	u.LockedUntil, u.CreatedAt, u.UpdatedAt = fromMS(locked), fromMS(uCreated), fromMS(uUpdated)
	now := db.now()
	if !now.Before(s.ExpiresAt) {
		if _, err := db.w.ExecContext(ctx, "DELETE FROM sessions WHERE token_hash = ?", hash); err != nil {
			return Session{}, User{}, failed("delete an expired session", err)
		}
		return Session{}, User{}, fmt.Errorf("%w (expired at %s)", ErrSessionInvalid, s.ExpiresAt.Format(time.RFC3339))
	}
	if now.Sub(s.LastSeenAt) >= lastSeenEvery {
		if _, err := db.w.ExecContext(ctx, "UPDATE sessions SET last_seen_at = ? WHERE token_hash = ?", ms(now), hash); err != nil {
			return Session{}, User{}, failed("touch a session", err)
		}
		s.LastSeenAt = now
	}
	return s, u, nil
}

// DeleteSession ends the session of a token (logout). A token that names no session is not an
// error: the session is gone either way.
func (db *DB) DeleteSession(ctx context.Context, token string) error {
	if _, err := db.w.ExecContext(ctx, "DELETE FROM sessions WHERE token_hash = ?", secretHash(token)); err != nil {
		return failed("delete a session", err)
	}
	return nil
}

// DeleteUserSessions ends every session of a user (password change, removal, "log out
// everywhere") and says how many there were.
func (db *DB) DeleteUserSessions(ctx context.Context, userID string) (int64, error) {
	res, err := db.w.ExecContext(ctx, "DELETE FROM sessions WHERE user_id = ?", userID)
	if err != nil {
		return 0, failed("delete the sessions of user "+userID, err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// ExpireSessions deletes every session that expired by now and says how many (a janitor's
// work; LookupSession refuses expired ones anyway).
func (db *DB) ExpireSessions(ctx context.Context) (int64, error) {
	res, err := db.w.ExecContext(ctx, "DELETE FROM sessions WHERE expires_at <= ?", ms(db.now()))
	if err != nil {
		return 0, failed("expire sessions", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// apiKeyPrefix starts every API key: plk_<26 base32 id>_<52 base32 secret>.
const apiKeyPrefix = "plk_"

// NewAPIKey is what CreateAPIKey takes.
type NewAPIKey struct {
	Tenant    string
	Name      string
	Role      Role
	CreatedBy string // who made it (a user id or login), for the record
}

const apiKeySelect = "SELECT k.id, k.tenant, k.name, k.role, k.prefix, k.fingerprint, t.status, k.created_by, k.created_at, k.last_used_at, k.revoked_at " +
	"FROM api_keys k JOIN tenants t ON t.slug = k.tenant"

func scanAPIKey(s scanner) (APIKey, error) {
	var k APIKey
	var role, status string
	var created, used, revoked int64
	if err := s.Scan(&k.ID, &k.Tenant, &k.Name, &role, &k.Prefix, &k.Fingerprint, &status, &k.CreatedBy, &created, &used, &revoked); err != nil {
		return APIKey{}, err
	}
	k.Role, k.TenantStatus = Role(role), TenantStatus(status)
	k.CreatedAt, k.LastUsedAt, k.RevokedAt = fromMS(created), fromMS(used), fromMS(revoked)
	return k, nil
}

// CreateAPIKey makes a key for a tenant and returns it, once: only its sha256 is stored.
func (db *DB) CreateAPIKey(ctx context.Context, nk NewAPIKey) (string, APIKey, error) {
	tenant, err := NormalizeTenant(nk.Tenant)
	if err != nil {
		return "", APIKey{}, err
	}
	if err := checkName("API key name", nk.Name); err != nil {
		return "", APIKey{}, err
	}
	if _, err := ParseRole(string(nk.Role)); err != nil {
		return "", APIKey{}, err
	}
	idPart := strings.ToLower(rand.Text())
	key := apiKeyPrefix + idPart + "_" + newSecret()
	hash := secretHash(key)
	id := "key_" + idPart
	var k APIKey
	err = db.write(ctx, "create an API key", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx,
			"INSERT INTO api_keys (id, tenant, name, key_hash, prefix, fingerprint, role, created_by, created_at, last_used_at, revoked_at) "+
				"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0)",
			id, tenant, nk.Name, hash, apiKeyPrefix+idPart, hash[:FingerprintLen], string(nk.Role), cut(nk.CreatedBy, 254), ms(db.now())); err != nil {
			return dbErr("create an API key", err, nil, fmt.Errorf("%w: %s", ErrTenantNotFound, tenant))
		}
		var err error
		if k, err = scanAPIKey(tx.QueryRowContext(ctx, apiKeySelect+" WHERE k.id = ?", id)); err != nil {
			return failed("read an API key", err)
		}
		return nil
	})
	if err != nil {
		return "", APIKey{}, err
	}
	return key, k, nil
}

// parseAPIKey is the id of a well-formed key.
func parseAPIKey(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, apiKeyPrefix)
	idPart, secret, ok2 := strings.Cut(rest, "_")
	if !ok || !ok2 || len(idPart) != 26 || len(secret) != 52 {
		return "", false
	}
	return "key_" + idPart, true
}

// AuthenticateAPIKey returns the key a secret is, comparing hashes in constant time. A
// malformed, unknown or revoked key is ErrAPIKeyInvalid. Its last_used_at moves at most once a
// minute. The caller refuses a key whose TenantStatus is disabled.
func (db *DB) AuthenticateAPIKey(ctx context.Context, key string) (APIKey, error) {
	id, ok := parseAPIKey(key)
	if !ok {
		return APIKey{}, ErrAPIKeyInvalid
	}
	var stored string
	row := db.r.QueryRowContext(ctx, "SELECT key_hash FROM api_keys WHERE id = ?", id)
	err := row.Scan(&stored)
	if errors.Is(err, sql.ErrNoRows) {
		return APIKey{}, ErrAPIKeyInvalid
	}
	if err != nil {
		return APIKey{}, failed("read an API key", err)
	}
	if !constantTimeEqual(secretHash(key), stored) {
		return APIKey{}, ErrAPIKeyInvalid
	}
	k, err := scanAPIKey(db.r.QueryRowContext(ctx, apiKeySelect+" WHERE k.id = ?", id))
	if errors.Is(err, sql.ErrNoRows) { // deleted with its tenant in between
		return APIKey{}, ErrAPIKeyInvalid
	}
	if err != nil {
		return APIKey{}, failed("read an API key", err)
	}
	if k.Revoked() {
		return APIKey{}, fmt.Errorf("%w (revoked at %s)", ErrAPIKeyInvalid, k.RevokedAt.Format(time.RFC3339))
	}
	if now := db.now(); now.Sub(k.LastUsedAt) >= lastSeenEvery {
		if _, err := db.w.ExecContext(ctx, "UPDATE api_keys SET last_used_at = ? WHERE id = ?", ms(now), id); err != nil {
			return APIKey{}, failed("touch an API key", err)
		}
		k.LastUsedAt = now
	}
	return k, nil
}

// RevokeAPIKey revokes a key of a tenant (a key of another tenant is ErrAPIKeyNotFound, as an
// unknown one is). Revoking a revoked key changes nothing.
func (db *DB) RevokeAPIKey(ctx context.Context, tenant, id string) (APIKey, error) {
	tenant, err := NormalizeTenant(tenant)
	if err != nil {
		return APIKey{}, err
	}
	var k APIKey
	err = db.write(ctx, "revoke an API key", func(tx *sql.Tx) error {
		var err error
		k, err = scanAPIKey(tx.QueryRowContext(ctx, apiKeySelect+" WHERE k.id = ? AND k.tenant = ?", id, tenant))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %s in tenant %s", ErrAPIKeyNotFound, id, tenant)
		}
		if err != nil {
			return failed("read an API key", err)
		}
		if k.Revoked() {
			return nil
		}
		now := db.now()
		if _, err := tx.ExecContext(ctx, "UPDATE api_keys SET revoked_at = ? WHERE id = ?", ms(now), id); err != nil {
			return failed("revoke an API key", err)
		}
		k.RevokedAt = now
		return nil
	})
	return k, err
}

// ListAPIKeys pages a tenant's keys, revoked ones included, oldest first.
func (db *DB) ListAPIKeys(ctx context.Context, tenant string, o ListOptions) (Page[APIKey], error) {
	tenant, err := NormalizeTenant(tenant)
	if err != nil {
		return Page[APIKey]{}, err
	}
	limit, err := pageLimit(o.Limit, DefaultLimit, MaxLimit)
	if err != nil {
		return Page[APIKey]{}, err
	}
	after, err := decodeCursor("api_keys", o.Cursor, 2)
	if err != nil {
		return Page[APIKey]{}, err
	}
	q, args := apiKeySelect+" WHERE k.tenant = ?", []any{tenant}
	if after != nil {
		at, err := strconv.ParseInt(after[0], 10, 64)
		if err != nil {
			return Page[APIKey]{}, fmt.Errorf("%w: bad time", ErrBadCursor)
		}
		q, args = q+" AND (k.created_at, k.id) > (?, ?)", append(args, at, after[1])
	}
	rows, err := queryAll(ctx, db.r, "list API keys", q+" ORDER BY k.created_at, k.id LIMIT ?", append(args, limit+1), scanAPIKey)
	if err != nil {
		return Page[APIKey]{}, err
	}
	return page(rows, limit, "api_keys", func(k APIKey) []string {
		return []string{strconv.FormatInt(ms(k.CreatedAt), 10), k.ID}
	}), nil
}

// constantTimeEqual compares two hashes without a timing that depends on where they differ.
func constantTimeEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
