-- The tenant gates' state of local mode (store.TenantDriver on the console's database,
-- store/sqlite/gates.go): what Redis holds for the workers' gates — the copy of the tenants'
-- statuses the console publishes with its deployment epoch, the running-limit overrides and
-- the running slots. (The console's own record of its tenants is `tenants`, 0001: these are
-- the gates' copy, kept as the cluster keeps it, so that one gate reads both.)

-- gate_status: a tenant's published status (active | disabled).
CREATE TABLE gate_status (
    tenant TEXT NOT NULL PRIMARY KEY,
    status TEXT NOT NULL
) WITHOUT ROWID;

-- gate_settings: the deployment epoch ('epoch') and other single values of the gates.
CREATE TABLE gate_settings (
    name  TEXT NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

-- gate_quota: a tenant's running-limit override, as stored (parsing it is the reader's rule).
CREATE TABLE gate_quota (
    tenant TEXT NOT NULL PRIMARY KEY,
    raw    TEXT NOT NULL
) WITHOUT ROWID;

-- gate_running: a running slot of an execution and when it expires (unix ms).
CREATE TABLE gate_running (
    tenant       TEXT    NOT NULL,
    execution_id TEXT    NOT NULL,
    expires_at   INTEGER NOT NULL,
    PRIMARY KEY (tenant, execution_id)
) WITHOUT ROWID;
