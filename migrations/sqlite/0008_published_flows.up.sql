-- The runtime's published flows in local mode: what Redis holds for the cluster under
-- <prefix>flow:<flow_id>:<version>, flow_versions:<flow_id> and flow_list (store/flows.go), in
-- the console's database (store.FlowsDriver, store/sqlite/flowstore.go), so that a console
-- without Redis runs the roles on the same flow store. Times are unix ms; a tenant is its slug
-- ('default' for the default tenant); the database serves one key root, the console's.
--
-- Tables of their own, not the console's flow_versions (0002), because that table is another
-- thing with another life:
--   * It is the console's record of what it published (who, the flow hash), written after the
--     runtime took a version, and the engine sync reads it to write back what the runtime lost
--     (control/engine_sync.go). Shared rows would make the record restore into itself, and a
--     version the runtime took first would be a record row without hash or publisher, which
--     the console's own RecordVersion then refuses as another definition.
--   * The runtime takes any valid tenant slug, as Redis does; flow_versions has a foreign key
--     to tenants and goes with a deleted tenant, while what the workers run is not unpublished
--     by a tenant's deletion (the console only publishes it disabled).
--   * The runtime's latest is the newest publication time (ties: the greater version, byte
--     order); the record orders by seq. And the runtime keeps each flow's last publication
--     (flow_list), which the record has no column for.

-- published_flows: a tenant's flows (flow_list), each with the time of its last publication.
CREATE TABLE published_flows (
    tenant       TEXT   NOT NULL,
    flow_id      TEXT   NOT NULL,
    published_at BIGINT NOT NULL,
    PRIMARY KEY (tenant, flow_id)
);
CREATE INDEX published_flows_by_time ON published_flows (tenant, published_at, flow_id);

-- published_flow_versions: a published version's definition, byte for byte, and when it was
-- published. published_at is NULL while the version is stored but not yet among the flow's
-- versions (a publication interrupted between its two writes, as a definition key without its
-- flow_versions member on Redis): Get finds it, Latest and the listings do not, and the next
-- publication of the same definition completes it.
CREATE TABLE published_flow_versions (
    tenant       TEXT   NOT NULL,
    flow_id      TEXT   NOT NULL,
    version      TEXT   NOT NULL,
    definition   TEXT   NOT NULL,
    published_at BIGINT,
    PRIMARY KEY (tenant, flow_id, version)
);
CREATE INDEX published_flow_versions_by_time ON published_flow_versions (tenant, flow_id, published_at, version);
