-- How the console database has been served (roles/console.go). A row per mode a console ran
-- in on this database: 'cluster' is written by every console that starts with Redis, and from
-- then on a console that finds Redis unreachable at its start waits for it instead of running
-- local mode (PLAITA_CONSOLE_LOCAL_FALLBACK allows local mode again): local mode on a database
-- that served with Redis would answer starts no worker or list of the cluster ever sees.
-- detail is where it was served (the Redis URL with its password masked); first_at and last_at
-- are unix ms.

CREATE TABLE console_served (
    mode     TEXT   NOT NULL PRIMARY KEY CHECK (mode IN ('cluster', 'local')),
    detail   TEXT   NOT NULL DEFAULT '',
    first_at BIGINT NOT NULL,
    last_at  BIGINT NOT NULL
);
