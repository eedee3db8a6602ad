-- The cron schedules of local mode, in the console's database: the embedded twin of the Redis
-- records (store.SchedulesDriver; store/sqlite/schedules.go), so that a console without Redis
-- runs the same schedule code. The cluster's authority stays Redis (store/schedules_redis.go):
-- nothing copies schedules between the two.
--
-- schedules: one schedule, keyed by the key root it is stored under (what store.NewSchedules is
-- given), its tenant ('default' for the default tenant) and its id. def is the definition
-- (JSON store.Schedule); rev counts the writes of the definition (the compare-and-set of every
-- edit, claim and skip); last_tick (unix ms) is the newest tick handled, or the baseline;
-- next_ms the first tick after it (NULL: none, while disabled); created_ms orders a tenant's
-- list. due_at is the due index: when the schedule role looks at the schedule next,
-- min(next_ms, claimed time + grace of each pending claim), NULL when there is nothing to do.
-- last_fire and last_skip are JSON (store.ScheduleFire, store.ScheduleSkip); last_fire_tick
-- is last_fire's tick, so that a late completion of an older tick does not replace it.
CREATE TABLE schedules (
    root           TEXT   NOT NULL,
    tenant         TEXT   NOT NULL,
    id             TEXT   NOT NULL,
    def            TEXT   NOT NULL,
    rev            BIGINT NOT NULL,
    last_tick      BIGINT NOT NULL,
    next_ms        BIGINT,
    created_ms     BIGINT NOT NULL,
    due_at         BIGINT,
    last_fire      TEXT,
    last_fire_tick BIGINT,
    last_skip      TEXT,
    PRIMARY KEY (root, tenant, id)
);
CREATE INDEX schedules_list ON schedules (root, tenant, created_ms, id);
CREATE INDEX schedules_due ON schedules (root, due_at) WHERE due_at IS NOT NULL;

-- schedule_pending: the pending claims of a schedule — a tick claimed whose start is not
-- confirmed enqueued yet — one per tick. claim is the JSON store.PendingFire exactly as
-- stored: the token a completion and a takeover compare byte for byte.
CREATE TABLE schedule_pending (
    root    TEXT   NOT NULL,
    tenant  TEXT   NOT NULL,
    id      TEXT   NOT NULL,
    tick_ms BIGINT NOT NULL,
    claim   TEXT   NOT NULL,
    PRIMARY KEY (root, tenant, id, tick_ms),
    FOREIGN KEY (root, tenant, id) REFERENCES schedules (root, tenant, id) ON DELETE CASCADE
);
