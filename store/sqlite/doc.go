// Package sqlite is the console's database (PLAITA_CONSOLE_DB_URL): tenants, users,
// memberships, sessions, API keys, the audit trail, bulk-operation jobs, flow drafts and the
// record of published versions, and the executions of local mode. With store/postgres it is
// the only package that writes SQL (the schema is in migrations/); it reads no configuration —
// the console passes the URL and the settings as options.
//
// # SQLite and database servers
//
// The console store's queries are written once, here, in SQL that SQLite and PostgreSQL both
// take, and run on a SQLite file (Open) or on a database server (OpenServer with a Server:
// store/postgres's driver brings its connections, its migration line, its table list and its
// serializable write transactions, run again after a serialization failure). One contract
// suite (consoletest) holds both. Local mode's embedded backend — the broker, execution
// states, wake-ups, events, schedules, gates, credentials — is SQLite's only (Embedded;
// ErrNotEmbedded): a console on a server database runs with Redis.
//
// # Opening
//
// Open(ctx, "sqlite:////var/lib/plaita/console.db") opens the file with WAL, a busy timeout,
// foreign keys, one writer connection (writes queue in the pool, not in SQLite's lock: no
// SQLITE_BUSY between the console's own goroutines) and a pool of read-only connections, and
// migrates the schema up (WithoutMigrate: as it is, for `plaita migrate`). Migrate, Version and
// CheckSchema drive golang-migrate over the embedded files; Ping is for readiness; Close once.
// sqlite://:memory: is a database for tests, on one connection.
//
// # The repositories
//
// Methods of *DB, one per operation, each parameterised and returning typed errors:
//   - tenants: CreateTenant, Tenant, ListTenants, AllTenants, RenameTenant, SetTenantStatus
//     (the status and an epoch to publish), DeleteTenant (disabled ones only);
//   - users: CreateUser, User, UserByLogin, ListUsers, SetPlatformAdmin, SetPassword,
//     UnlockUser, DeleteUser, VerifyPassword (argon2id, lock-out), EnsureBootstrapAdmin;
//   - memberships: SetMembership, Membership, RemoveMembership, ListMembers, UserMemberships;
//     roles viewer < editor < admin (Role.AtLeast);
//   - sessions: CreateSession (the token, once), LookupSession, DeleteSession,
//     DeleteUserSessions, ExpireSessions;
//   - API keys: CreateAPIKey (the key, once), AuthenticateAPIKey, RevokeAPIKey, ListAPIKeys;
//     Fingerprint names any secret in logs and audit rows;
//   - audit: AppendAudit (denials coalesced per key and window), ListAudit;
//   - jobs: CreateJob, UpdateJob, Job, ListJobs; bulk jobs (bulk.go) with their items:
//     CreateBulkJob, ClaimJobItems and RecordJobItems under a runner's lease, ReleaseJob,
//     CancelJob, RunnableJobs, JobItems;
//   - flows: SaveDraft, Draft, ListDrafts, DeleteDraft, RecordVersion, FlowVersion,
//     ListVersions, AllVersions;
//   - the runtime's published flows of local mode: FlowStore() — store.FlowsDriver under
//     store.Flows, the twin of the Redis keys (published_flows, published_flow_versions; not
//     the record above);
//   - the event bus of local mode: EventStore(notify) — store.EventsDriver under store.Events
//     (event records, type indexes and feeds, the tenant list and cursors, wake-up markers; the
//     notifications through notify, the process's hub);
//   - local executions: Executions() — Save, Load (store.Storage), LoadGeneration, SaveIf,
//     Delete, RequestCancel, Cancelled, List (ExecutionCursorAfter: a cursor after any row),
//     ReconcileOrphans;
//   - how the database was served: MarkServed, ServedIn (cluster: a console started on it
//     with Redis; local: one ran local mode on it).
//   - what several consoles on one database share (leases.go, login_failures.go): ClaimLease,
//     ReleaseLease (the singletons' leases); LoginLockedUntil, RecordLoginFailure,
//     ClearLoginFailures, PruneLoginFailures (the login guard's failures);
//   - Copy (copy.go): the console's tables into another database, verified by counts and
//     checksums (plaita migrate copy); ConsoleTables, LocalTables, CountRows.
//   - schedules: Schedules() is store.SchedulesDriver over the tables of migration 0010, local
//     mode's cron schedules under store.Schedules, held to the contract the Redis driver passes
//     (storetest.SchedulesContract);
//   - local mode's broker and execution storage, each the twin of a Redis driver held to one
//     contract: Broker() (queue.Driver: task and dead-letter streams, markers) and Delays()
//     (queue.DelayDriver), migration 0005; StoreDrivers() for store.NewStore — States()
//     (store.StateDriver, 0006), Wakeups() (store.WakeupDriver, 0007), Gates()
//     (store.TenantDriver, 0009), Lists() (store.ListDriver over those tables).
//
// Lists take ListOptions (an opaque cursor and a bounded limit) and return a Page; the audit
// has its own query (before_id, limit 1..1000, default 200).
//
// # Errors
//
// Every error matches one of the package's broad sentinels (errors.go): store.ErrNotFound,
// store.ErrInvalid, ErrExists, ErrPrecondition, ErrUnauthenticated, ErrSchema, the execution
// errors of package store, and ErrDB — the only transient one (model.IsTransient) — and has
// exactly one class of package model. The HTTP API maps the class to a status; the sentinels
// (ErrTenantNotFound, ErrLoginTaken …) say which thing it was, and some carry the code the API
// answers.
//
// # Portable SQL
//
// The queries use what SQLite and PostgreSQL both take: ? placeholders (store/postgres's
// connections rebind them to $n), INSERT … ON CONFLICT … DO UPDATE, RETURNING, row-value comparisons for
// keyset pagination, CASE instead of two-argument max(); times are BIGINT unix milliseconds,
// flags BOOLEAN, JSON TEXT. The SQLite-only parts are the connection pragmas, the schema
// version queries (sqlite_master) and the audit id's AUTOINCREMENT in the DDL.
package sqlite
