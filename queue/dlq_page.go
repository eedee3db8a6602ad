package queue

import (
	"context"
	"fmt"
)

// DLQPage is up to count dead letters older than before ("" = from the newest), newest first,
// and the before of the next page ("" when the stream has no older entry): a walk through the
// whole dead-letter stream a page at a time (a bulk replay by filter), where ListDLQ reads only
// its newest entries.
func (q *Queue) DLQPage(ctx context.Context, before string, count int) ([]DLQEntry, string, error) {
	end := "+"
	if before != "" {
		if _, ok := parseID(before); !ok {
			return nil, "", fmt.Errorf("%w: %q is not a stream id", ErrDLQEntryNotFound, before)
		}
		end = "(" + before // exclusive (Redis 6.2)
	}
	count = max(count, 1)
	found, err := q.d.Range(ctx, q.dlq, Span{Start: "-", End: end, Count: count, Rev: true})
	if err != nil {
		return nil, "", fmt.Errorf("page: %w", err)
	}
	out := make([]DLQEntry, 0, len(found[0]))
	for _, e := range found[0] {
		out = append(out, dlqEntry(e))
	}
	next := ""
	if len(out) == count {
		next = out[len(out)-1].ID
	}
	return out, next, nil
}
