-- Local mode's embedded backend (migrations/sqlite/0010_schedules.down.sql): local mode runs on a
-- SQLite console database only (docs/console.md), so this version changes nothing here; it
-- keeps the two lines at the same versions.
SELECT 1;
