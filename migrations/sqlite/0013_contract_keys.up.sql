-- A tenant's contract keys (control/hooks.go): the secrets external systems sign their
-- trigger requests with (Standard Webhooks), several active at once for a rotation. The
-- secret is sealed under the master key's purpose subkey "contract-keys" (internal/keyring),
-- bound to the tenant and the key id; retired_at (unix ms) ends a key.
CREATE TABLE contract_keys (
    tenant      TEXT    NOT NULL,
    key_id      TEXT    NOT NULL,
    sealed      TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    created_by  TEXT    NOT NULL DEFAULT '',
    retired_at  INTEGER,
    PRIMARY KEY (tenant, key_id)
) WITHOUT ROWID;
