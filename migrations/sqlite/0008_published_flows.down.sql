DROP INDEX published_flow_versions_by_time;
DROP TABLE published_flow_versions;
DROP INDEX published_flows_by_time;
DROP TABLE published_flows;
