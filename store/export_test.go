package store

// ClaimWakeByScript makes d claim as on a Redis without SET … NX GET (before 7.0).
func ClaimWakeByScript(d *RedisEventsDriver) { d.claimByScript.Store(true) }
