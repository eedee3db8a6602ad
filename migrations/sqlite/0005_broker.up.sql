-- The embedded broker of local mode: what Redis holds for the cluster, in the console's
-- database (queue.Driver and queue.DelayDriver, store/sqlite/broker.go, delay.go), so that a
-- console without Redis runs the same roles on the same queue code.
--
-- streams: a task or dead-letter stream and the last id it handed out (ids never go back,
-- even when the newest entry is deleted). Ids are Redis stream ids: "<ms>-<seq>".
CREATE TABLE streams (
    name     TEXT    NOT NULL PRIMARY KEY,
    last_ms  INTEGER NOT NULL DEFAULT 0,
    last_seq INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- stream_entries: one entry; fields is a JSON object of its field/value pairs.
CREATE TABLE stream_entries (
    stream TEXT    NOT NULL REFERENCES streams (name) ON DELETE CASCADE,
    ms     INTEGER NOT NULL,
    seq    INTEGER NOT NULL,
    fields TEXT    NOT NULL,
    PRIMARY KEY (stream, ms, seq)
) WITHOUT ROWID;

-- stream_groups: a consumer group and the id of the last entry it was handed.
CREATE TABLE stream_groups (
    stream   TEXT    NOT NULL REFERENCES streams (name) ON DELETE CASCADE,
    name     TEXT    NOT NULL,
    last_ms  INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    PRIMARY KEY (stream, name)
) WITHOUT ROWID;

-- stream_consumers: the consumer names a group has seen.
CREATE TABLE stream_consumers (
    stream TEXT NOT NULL,
    grp    TEXT NOT NULL,
    name   TEXT NOT NULL,
    PRIMARY KEY (stream, grp, name),
    FOREIGN KEY (stream, grp) REFERENCES stream_groups (stream, name) ON DELETE CASCADE
) WITHOUT ROWID;

-- stream_pending: a group's pending list — handed out, not acknowledged. delivered_at (unix
-- ms) is when it was last handed out or held (its idle time runs from there).
CREATE TABLE stream_pending (
    stream       TEXT    NOT NULL,
    grp          TEXT    NOT NULL,
    ms           INTEGER NOT NULL,
    seq          INTEGER NOT NULL,
    consumer     TEXT    NOT NULL,
    delivered_at INTEGER NOT NULL,
    deliveries   INTEGER NOT NULL,
    PRIMARY KEY (stream, grp, ms, seq),
    FOREIGN KEY (stream, grp) REFERENCES stream_groups (stream, name) ON DELETE CASCADE
) WITHOUT ROWID;

-- markers: one-shot markers with an expiry (unix ms): a dead-lettered source, a replayed dead
-- letter.
CREATE TABLE markers (
    key        TEXT    NOT NULL PRIMARY KEY,
    value      TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX markers_expiry ON markers (expires_at);

-- delay_members: a delay queue's members with their time (unix ms) and failed sends.
CREATE TABLE delay_members (
    queue    TEXT    NOT NULL,
    member   TEXT    NOT NULL,
    due_at   INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, member)
) WITHOUT ROWID;
CREATE INDEX delay_members_due ON delay_members (queue, due_at, member);

-- delay_dead: members given up, with their record (JSON).
CREATE TABLE delay_dead (
    queue  TEXT NOT NULL,
    member TEXT NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (queue, member)
) WITHOUT ROWID;
