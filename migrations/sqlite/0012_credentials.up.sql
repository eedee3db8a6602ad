-- The tenants' credentials in local mode (store.CredentialsDriver on the console's database,
-- store/sqlite/credentials.go): each value sealed (internal/keyring: never in clear), its
-- fingerprint, a revision every change checks, and who wrote it when (unix ms).
CREATE TABLE credentials (
    tenant      TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    sealed      TEXT    NOT NULL,
    fingerprint TEXT    NOT NULL,
    rev         INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    created_by  TEXT    NOT NULL DEFAULT '',
    updated_by  TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (tenant, name)
) WITHOUT ROWID;
