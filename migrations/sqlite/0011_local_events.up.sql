-- The event bus of local mode (store.EventsDriver on the console's database,
-- store/sqlite/events.go): what Redis holds for the cluster under <prefix>event:<id>,
-- event_index:<type>[:prune], events and event_wake:… per tenant, and <root>:event_bus:tenants
-- and :cursor per key root (store/events.go) — so that a console without Redis publishes,
-- lists and delivers events on the same rules. Times and scores are unix ms; a tenant is its
-- slug ('default' for the default tenant); the database serves one key root, the console's.
-- A row past its expires_at reads as absent, as an expired key does, and is deleted by a
-- later write. The notifications (<root>:event_bus:notify) have no table: they go through
-- the process's hub, as pub/sub keeps nothing.

-- event_records: a published event's record, the JSON store.EncodeEvent writes, until its TTL
-- (PLAITA_EVENT_TTL_SECONDS) ends.
CREATE TABLE event_records (
    tenant     TEXT    NOT NULL,
    event_id   TEXT    NOT NULL,
    record     TEXT    NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, event_id)
);
CREATE INDEX event_records_by_expiry ON event_records (expires_at);

-- event_sets: one sorted set of a tenant — a type's index (kind 'index': event ids) or the
-- feed (kind 'feed', event_type '': "<type> <id>") — and when it expires as a whole (the
-- event TTL after its last publish).
CREATE TABLE event_sets (
    tenant     TEXT    NOT NULL,
    kind       TEXT    NOT NULL CHECK (kind IN ('index', 'feed')),
    event_type TEXT    NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, kind, event_type)
);
CREATE INDEX event_sets_by_expiry ON event_sets (expires_at);

-- event_members: the members of a set, scored by publish time.
CREATE TABLE event_members (
    tenant     TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    event_type TEXT    NOT NULL,
    member     TEXT    NOT NULL,
    score      INTEGER NOT NULL,
    PRIMARY KEY (tenant, kind, event_type, member),
    FOREIGN KEY (tenant, kind, event_type) REFERENCES event_sets (tenant, kind, event_type) ON DELETE CASCADE
);
CREATE INDEX event_members_by_score ON event_members (tenant, kind, event_type, score, member);

-- event_prune_throttles: a type's write-side prune is taken until expires_at (60 s): at most
-- one prune per (tenant, type) in that time.
CREATE TABLE event_prune_throttles (
    tenant     TEXT    NOT NULL,
    event_type TEXT    NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, event_type)
);

-- event_tenants: the tenants that published, with their last publish (the filter's
-- reconciler and janitor walk them; the janitor forgets an idle one).
CREATE TABLE event_tenants (
    tenant  TEXT    NOT NULL PRIMARY KEY,
    last_at INTEGER NOT NULL
);
CREATE INDEX event_tenants_by_time ON event_tenants (last_at, tenant);

-- event_cursors: the reconciler's cursor of a tenant: the feed is scanned up to at. It only
-- moves forward.
CREATE TABLE event_cursors (
    tenant TEXT    NOT NULL PRIMARY KEY,
    at     INTEGER NOT NULL
);

-- event_wakes: the one-shot wake-up marker of delivering an event to one suspension of an
-- execution: 'pending <ms> <owner>', 'sent <ms> <stream id>' or 'refused <ms> <why>', living
-- the event TTL and a day from its last write.
CREATE TABLE event_wakes (
    tenant       TEXT    NOT NULL,
    execution_id TEXT    NOT NULL,
    suspension   TEXT    NOT NULL,
    event_id     TEXT    NOT NULL,
    value        TEXT    NOT NULL,
    expires_at   INTEGER NOT NULL,
    PRIMARY KEY (tenant, execution_id, suspension, event_id)
);
CREATE INDEX event_wakes_by_expiry ON event_wakes (expires_at);
