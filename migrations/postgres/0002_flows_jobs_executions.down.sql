DROP INDEX jobs_by_tenant;
DROP TABLE jobs;
DROP INDEX flow_versions_by_seq;
DROP TABLE flow_versions;
DROP TABLE flows;
