DROP TABLE schedule_pending;
DROP INDEX schedules_due;
DROP INDEX schedules_list;
DROP TABLE schedules;
