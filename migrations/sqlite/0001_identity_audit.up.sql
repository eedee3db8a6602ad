-- Tenants, the people and keys that act in them, and the audit of what they did.
-- Times are unix milliseconds (UTC) in BIGINT columns; booleans are BOOLEAN; JSON is TEXT.

CREATE TABLE tenants (
    slug         TEXT    NOT NULL PRIMARY KEY,
    name         TEXT    NOT NULL,
    status       TEXT    NOT NULL CHECK (status IN ('active', 'disabled')),
    -- status_epoch counts the tenant's status changes (1 at creation).
    status_epoch BIGINT  NOT NULL,
    created_at   BIGINT  NOT NULL,
    updated_at   BIGINT  NOT NULL
);

-- The default tenant always exists: its keys carry no slug (store/keys).
INSERT INTO tenants (slug, name, status, status_epoch, created_at, updated_at)
VALUES ('default', 'Default tenant', 'active', 1, 0, 0);

CREATE TABLE users (
    id             TEXT    NOT NULL PRIMARY KEY,
    -- login is an e-mail address or a name, stored lower-cased.
    login          TEXT    NOT NULL UNIQUE,
    display_name   TEXT    NOT NULL DEFAULT '',
    -- password_hash is a PHC string: $argon2id$v=19$m=…,t=…,p=…$salt$hash
    password_hash  TEXT    NOT NULL,
    platform_admin BOOLEAN NOT NULL DEFAULT FALSE,
    failed_logins  INTEGER NOT NULL DEFAULT 0,
    locked_until   BIGINT  NOT NULL DEFAULT 0,
    created_at     BIGINT  NOT NULL,
    updated_at     BIGINT  NOT NULL
);

CREATE TABLE memberships (
    user_id    TEXT   NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    tenant     TEXT   NOT NULL REFERENCES tenants (slug) ON DELETE CASCADE,
    role       TEXT   NOT NULL CHECK (role IN ('viewer', 'editor', 'admin')),
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (user_id, tenant)
);
CREATE INDEX memberships_by_tenant ON memberships (tenant, user_id);

-- A session is stored by the sha256 of its token; the token itself is never stored.
CREATE TABLE sessions (
    token_hash   TEXT   NOT NULL PRIMARY KEY,
    user_id      TEXT   NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    last_seen_at BIGINT NOT NULL,
    ip           TEXT   NOT NULL DEFAULT '',
    user_agent   TEXT   NOT NULL DEFAULT ''
);
CREATE INDEX sessions_by_user ON sessions (user_id);
CREATE INDEX sessions_by_expiry ON sessions (expires_at);

-- An API key is stored by the sha256 of the key; prefix is its public part (plk_<id>),
-- fingerprint the first 12 hex digits of the sha256, for logs and audit rows.
CREATE TABLE api_keys (
    id           TEXT   NOT NULL PRIMARY KEY,
    tenant       TEXT   NOT NULL REFERENCES tenants (slug) ON DELETE CASCADE,
    name         TEXT   NOT NULL,
    key_hash     TEXT   NOT NULL UNIQUE,
    prefix       TEXT   NOT NULL,
    fingerprint  TEXT   NOT NULL,
    role         TEXT   NOT NULL CHECK (role IN ('viewer', 'editor', 'admin')),
    created_by   TEXT   NOT NULL DEFAULT '',
    created_at   BIGINT NOT NULL,
    last_used_at BIGINT NOT NULL DEFAULT 0,
    revoked_at   BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX api_keys_by_tenant ON api_keys (tenant, created_at, id);

-- The audit trail. Denials of one (action, actor, ip, tenant, reason) within a window are one
-- row whose suppressed count grows; last_at is the newest of them. It has no foreign keys: it
-- outlives the tenants and users it names. The AUTOINCREMENT id (never reused) is the
-- before_id cursor; PostgreSQL spells it BIGINT GENERATED ALWAYS AS IDENTITY.
CREATE TABLE audit (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    at         BIGINT  NOT NULL,
    last_at    BIGINT  NOT NULL,
    actor      TEXT    NOT NULL,
    actor_kind TEXT    NOT NULL,
    tenant     TEXT    NOT NULL,
    action     TEXT    NOT NULL,
    target     TEXT    NOT NULL DEFAULT '',
    outcome    TEXT    NOT NULL CHECK (outcome IN ('allow', 'deny')),
    reason     TEXT    NOT NULL DEFAULT '',
    ip         TEXT    NOT NULL DEFAULT '',
    request_id TEXT    NOT NULL DEFAULT '',
    details    TEXT    NOT NULL DEFAULT '{}',
    suppressed INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX audit_by_tenant ON audit (tenant, id);
CREATE INDEX audit_denials ON audit (action, actor, ip, tenant, reason, at) WHERE outcome = 'deny';
