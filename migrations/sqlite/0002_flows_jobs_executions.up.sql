-- Flow drafts and the console's record of what it published, bulk-operation jobs, and the
-- executions of local mode (Redis unreachable at start).

CREATE TABLE flows (
    tenant     TEXT   NOT NULL REFERENCES tenants (slug) ON DELETE CASCADE,
    flow_id    TEXT   NOT NULL,
    definition TEXT   NOT NULL,
    -- revision counts the saves of the draft (1 at creation): the If-Match of an edit.
    revision   BIGINT NOT NULL,
    updated_by TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (tenant, flow_id)
);

-- A published (tenant, flow id, version) is immutable, as in Redis (store/flows.go); seq orders
-- the versions of one flow by publication.
CREATE TABLE flow_versions (
    tenant       TEXT   NOT NULL REFERENCES tenants (slug) ON DELETE CASCADE,
    flow_id      TEXT   NOT NULL,
    version      TEXT   NOT NULL,
    seq          BIGINT NOT NULL,
    definition   TEXT   NOT NULL,
    hash         TEXT   NOT NULL,
    hash_algo    TEXT   NOT NULL,
    published_by TEXT   NOT NULL,
    published_at BIGINT NOT NULL,
    PRIMARY KEY (tenant, flow_id, version)
);
CREATE UNIQUE INDEX flow_versions_by_seq ON flow_versions (tenant, flow_id, seq);

-- A bulk operation by filter. failures is a JSON array of {"item", "error"}, at most a bound
-- long; failures_dropped counts the ones beyond it.
CREATE TABLE jobs (
    id               TEXT    NOT NULL PRIMARY KEY,
    tenant           TEXT    NOT NULL,
    kind             TEXT    NOT NULL,
    filter           TEXT    NOT NULL,
    dry_run          BOOLEAN NOT NULL DEFAULT FALSE,
    status           TEXT    NOT NULL CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled')),
    total            INTEGER NOT NULL DEFAULT 0,
    succeeded        INTEGER NOT NULL DEFAULT 0,
    failed           INTEGER NOT NULL DEFAULT 0,
    failures         TEXT    NOT NULL DEFAULT '[]',
    failures_dropped INTEGER NOT NULL DEFAULT 0,
    error            TEXT    NOT NULL DEFAULT '',
    created_by       TEXT    NOT NULL DEFAULT '',
    created_at       BIGINT  NOT NULL,
    updated_at       BIGINT  NOT NULL
);
CREATE INDEX jobs_by_tenant ON jobs (tenant, created_at, id);

-- Local-mode execution states: state is the JSON store.Encode writes (the bytes Redis would
-- hold); the other columns are copies of its fields, for listing. generation grows at every
-- write: the compare-and-swap of the orphan reconcile.
CREATE TABLE local_executions (
    execution_id     TEXT    NOT NULL PRIMARY KEY,
    tenant           TEXT    NOT NULL,
    flow_id          TEXT    NOT NULL,
    flow_version     TEXT    NOT NULL,
    status           TEXT    NOT NULL,
    state            TEXT    NOT NULL,
    generation       BIGINT  NOT NULL,
    cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
    started_at       BIGINT  NOT NULL,
    updated_at       BIGINT  NOT NULL
);
CREATE INDEX local_executions_by_tenant ON local_executions (tenant, started_at, execution_id);
CREATE INDEX local_executions_by_status ON local_executions (status, execution_id);
