-- Bulk jobs run by the console (control/bulk.go): the items a job selected when it was
-- created, each with what became of it, and who runs the job. The runner holds a lease
-- (runner, lease_until: unix ms) so that two consoles on one database never run one job at
-- once and a console that died leaves its jobs to the next; an item is 'applying' while a
-- runner has it, so one left so by a dead runner is known not to be applied twice.

ALTER TABLE jobs ADD COLUMN truncated BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE jobs ADD COLUMN runner TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN lease_until BIGINT NOT NULL DEFAULT 0;
CREATE INDEX jobs_by_status ON jobs (status, created_at);

CREATE TABLE job_items (
    job_id TEXT    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    seq    INTEGER NOT NULL,
    item   TEXT    NOT NULL,
    state  TEXT    NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'applying', 'done', 'failed')),
    result TEXT    NOT NULL DEFAULT '',
    code   TEXT    NOT NULL DEFAULT '',
    error  TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (job_id, seq)
);
CREATE INDEX job_items_by_state ON job_items (job_id, state, seq);
