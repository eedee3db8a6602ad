// Package queue is plaita's task queue: the task envelope (envelope.go), the stream the
// workers consume through one consumer group, the delivery gate, the dead-letter stream and
// its replay, the residue sweeper, and the delay queue's schedule (Delay).
//
// # Drivers
//
// Queue, Producer and Delay hold every policy; what they store goes through a Driver (task
// streams: driver.go) and a DelayDriver. RedisDriver and RedisDelay are Redis Streams, ZSETs and
// the scripts below, one round trip per driver call, as in the cluster; store/sqlite's Broker
// and Delays are the same on the console's database, for local mode. Both are held to one
// contract, queuetest, in the default tests. Below, the Redis command names describe the
// cluster; the embedded driver does the same in SQL transactions.
//
// # Envelope
//
// A task is one stream entry with one field, "payload", holding the envelope JSON. Enqueue is
// the only writer: it stamps schema_version (SchemaVersion unless the envelope
// already carries a version, as copies do) and created_at, and validates — a start must carry
// the execution_id its producer minted with engine.NewExecutionID(). Copies (Queue.Requeue)
// and DLQ replays (Queue.Replay) inherit the source's schema_version and config generation
// fields; a message without generation fields is legacy and stays legacy. Producers put their
// own generations on a fresh envelope with Envelope.Stamp.
//
// Decoding (Decode) tolerates unknown fields at every schema version, because the contract
// adds fields without bumping the schema; they are kept and written back on re-enqueue. Known
// fields are strict: a wrong type or a missing required field makes the entry malformed. A
// schema_version newer than this build is not interpreted beyond the gating fields. A legacy
// start without execution_id gets DeterministicExecutionID of its stream entry, the id a DLQ
// replay of it would get.
//
// # Deliveries
//
// Read (XREADGROUP >) hands out new entries with delivery count 1; Reclaim takes over entries
// idle for PLAITA_CLAIM_MIN_IDLE_MS with XPENDING + XRANGE + XCLAIM of the accepted ids only
// (not XAUTOCLAIM, which would claim entries the generation gate must leave alone), with count
// = the pending list's counter after the claim. Gate decides, Apply carries the decision out:
//
//	another config_family / budget_generation  leave pending, counter restored (no delivery burned)
//	schema_version newer than this build       dead-letter once, never clone
//	malformed                                  dead-letter (reason "malformed")
//	older than PLAITA_TASK_MAX_AGE_SECONDS     ack and drop with a WARNING (fail-closed on unknown age)
//	count > PLAITA_MAX_DELIVERIES              dead-letter (reason "max_deliveries=N")
//	otherwise                                  run; then Ack (XACK + XDEL)
//
// # Dead letters and residue
//
// DeadLetter writes the DLQ entry, trims the DLQ to exactly PLAITA_DLQ_MAX_LEN and acks the
// source; a short-lived marker makes a source whose ack failed go to the DLQ only once.
// Replay re-enqueues a dead letter exactly once (marker <dlq>:replayed:<id>). SweepResidue
// removes entries that were acked but not deleted; Sweeper (a service) runs it at start and every
// DefaultSweepInterval.
//
// # List → Stream
//
// ListDrain (listdrain.go) moves a legacy Redis List queue into the stream, each item once
// across kills and re-runs: LMOVE to a processing list, one script that adds the entry with its
// one-shot marker, LREM. The copies keep their item's schema_version and generations.
//
// Counters go to the *metrics.Set given to New as plaita_queue_<name>_total{queue="…"}.
// Requires Redis 6.2 or newer (XPENDING IDLE, exclusive ranges).
package queue
