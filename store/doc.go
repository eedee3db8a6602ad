// Package store holds execution storage (Redis with leases and fencing, and an in-memory
// backend that serializes exactly like it), the Redis key space, and the console's SQLite store.
package store
