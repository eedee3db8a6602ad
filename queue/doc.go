// Package queue holds the task envelope, the Redis Stream task queue with its dead-letter
// stream, and the delay queue.
package queue
