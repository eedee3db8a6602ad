DROP INDEX job_items_by_state;
DROP TABLE job_items;
DROP INDEX jobs_by_status;
ALTER TABLE jobs DROP COLUMN lease_until;
ALTER TABLE jobs DROP COLUMN runner;
ALTER TABLE jobs DROP COLUMN truncated;
