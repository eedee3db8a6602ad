-- What several consoles on one database share (docs/console.md, "Several consoles"):
--
-- console_leases: the console's singletons (the tenant-status reconcile, the engine sync) run
-- on the one console that holds their lease; holder is its instance id, until (unix ms) when
-- the lease ends unless renewed — a console that died leaves it to the next.
--
-- login_failures: the failed logins of a (login, client network) pair, so that the login
-- guard's lock holds on every console (web/api/throttle.go): failures since last_at (unix
-- ms), and locked_until (unix ms) once they reached the limit.
CREATE TABLE console_leases (
    name   TEXT   NOT NULL PRIMARY KEY,
    holder TEXT   NOT NULL,
    until  BIGINT NOT NULL
);

CREATE TABLE login_failures (
    login        TEXT    NOT NULL,
    network      TEXT    NOT NULL,
    failures     INTEGER NOT NULL,
    last_at      BIGINT  NOT NULL,
    locked_until BIGINT  NOT NULL DEFAULT 0,
    PRIMARY KEY (login, network)
);
CREATE INDEX login_failures_by_last ON login_failures (last_at);
