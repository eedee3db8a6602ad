package control

import (
	"context"

	"github.com/redis/rueidis"

	"plaita/queue"
)

// CheckQueueKeys checks over c that the task stream and the dead-letter stream named stream
// and dlq are streams or absent: what a worker checks before it starts, for a front end that
// checks a configuration without starting one (plaita doctor --redis).
func CheckQueueKeys(ctx context.Context, c rueidis.Client, stream, dlq string) error {
	return queue.CheckStreamKeys(ctx, queue.Redis(c), stream, dlq)
}
