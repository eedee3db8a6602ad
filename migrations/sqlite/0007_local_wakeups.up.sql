-- Wake-up records of local mode (store.WakeupDriver on the console's database,
-- store/sqlite/wakeups.go): what Redis holds for the filter and the console — subscription and
-- approval records, the per-type index of uncorrelated waits, the buckets of correlated waits
-- and the paths they are indexed by, the approval index. Times and scores are unix ms; a score
-- of 4611686018427387904 (2^62) is "no timeout"; an expires_at of 0 never expires, and a row
-- past its expiry reads as absent.

-- wake_records: a subscription ('subscription') or approval ('approval') record.
CREATE TABLE wake_records (
    tenant       TEXT    NOT NULL,
    kind         TEXT    NOT NULL CHECK (kind IN ('subscription', 'approval')),
    execution_id TEXT    NOT NULL,
    record       TEXT    NOT NULL,
    expires_at   INTEGER NOT NULL,
    PRIMARY KEY (tenant, kind, execution_id)
) WITHOUT ROWID;

-- wake_sets: one sorted set — a type's index (path and value ''), its paths (value ''), a
-- bucket (path and value), or the approval index (kind 'approvals', event_type '') — and when
-- it expires as a whole (a registration keeps it at least its record's TTL, never shorter).
CREATE TABLE wake_sets (
    tenant     TEXT    NOT NULL,
    kind       TEXT    NOT NULL CHECK (kind IN ('index', 'paths', 'bucket', 'approvals')),
    event_type TEXT    NOT NULL,
    path       TEXT    NOT NULL,
    value      TEXT    NOT NULL,
    expires_at INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, kind, event_type, path, value)
) WITHOUT ROWID;

-- wake_members: the members of a set with their scores.
CREATE TABLE wake_members (
    tenant     TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    event_type TEXT    NOT NULL,
    path       TEXT    NOT NULL,
    value      TEXT    NOT NULL,
    member     TEXT    NOT NULL,
    score      INTEGER NOT NULL,
    PRIMARY KEY (tenant, kind, event_type, path, value, member),
    FOREIGN KEY (tenant, kind, event_type, path, value) REFERENCES wake_sets (tenant, kind, event_type, path, value) ON DELETE CASCADE
) WITHOUT ROWID;
CREATE INDEX wake_members_by_score ON wake_members (tenant, kind, event_type, path, value, score, member);
