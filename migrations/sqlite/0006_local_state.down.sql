DROP TABLE exec_counters;
DROP TABLE exec_fences;
DROP INDEX exec_index_by_execution;
DROP TABLE exec_index_by;
DROP INDEX exec_states_by_start;
DROP TABLE exec_states;
