DROP INDEX login_failures_by_last;
DROP TABLE login_failures;
DROP TABLE console_leases;
