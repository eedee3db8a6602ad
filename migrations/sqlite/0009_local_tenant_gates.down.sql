DROP TABLE gate_running;
DROP TABLE gate_quota;
DROP TABLE gate_settings;
DROP TABLE gate_status;
