-- Execution storage of local mode (store.StateDriver on the console's database,
-- store/sqlite/state.go): what Redis holds per execution for the cluster — the state, its place
-- in the tenant's list and in the lists of its indexed values, the lease and the fence
-- generation, the cancel flag, the tombstone and the counters. Times are unix ms; an
-- expires_at of 0 never expires, a row past its expiry reads as absent.
--
-- (local_executions, from 0002, is what the earlier local mode wrote; it is read as it was
-- until local mode runs on these tables, whose migration moves its rows here.)

-- exec_states: one state per execution of a tenant; started_at orders the tenant's list.
CREATE TABLE exec_states (
    tenant       TEXT    NOT NULL,
    execution_id TEXT    NOT NULL,
    state        BLOB    NOT NULL,
    started_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, execution_id)
) WITHOUT ROWID;
CREATE INDEX exec_states_by_start ON exec_states (tenant, started_at, execution_id);

-- exec_index_by: an execution under one of its indexed values (state.Execution.Index).
CREATE TABLE exec_index_by (
    tenant       TEXT    NOT NULL,
    field        TEXT    NOT NULL,
    value        TEXT    NOT NULL,
    execution_id TEXT    NOT NULL,
    started_at   INTEGER NOT NULL,
    PRIMARY KEY (tenant, field, value, execution_id)
) WITHOUT ROWID;
CREATE INDEX exec_index_by_execution ON exec_index_by (tenant, execution_id);

-- exec_fences: the lease (holder|token), the fence generation (only ever grows, kept after a
-- delete), the cancel flag and the tombstone of an execution.
CREATE TABLE exec_fences (
    tenant            TEXT    NOT NULL,
    execution_id      TEXT    NOT NULL,
    fencegen          INTEGER NOT NULL DEFAULT 0,
    lease             TEXT    NOT NULL DEFAULT '',
    lease_expires_at  INTEGER NOT NULL DEFAULT 0,
    cancel_expires_at INTEGER NOT NULL DEFAULT 0,
    tombstone         TEXT    NOT NULL DEFAULT '',
    tomb_expires_at   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, execution_id)
) WITHOUT ROWID;

-- exec_counters: the per-execution counters (node is '' for a family's counter, the node id
-- for a per-node retry counter).
CREATE TABLE exec_counters (
    tenant       TEXT    NOT NULL,
    execution_id TEXT    NOT NULL,
    family       TEXT    NOT NULL,
    node         TEXT    NOT NULL DEFAULT '',
    value        INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    PRIMARY KEY (tenant, execution_id, family, node)
) WITHOUT ROWID;
