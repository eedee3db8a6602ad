DROP INDEX wake_members_by_score;
DROP TABLE wake_members;
DROP TABLE wake_sets;
DROP TABLE wake_records;
