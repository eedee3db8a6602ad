DROP INDEX local_executions_by_status;
DROP INDEX local_executions_by_tenant;
DROP TABLE local_executions;
DROP INDEX jobs_by_tenant;
DROP TABLE jobs;
DROP INDEX flow_versions_by_seq;
DROP TABLE flow_versions;
DROP TABLE flows;
