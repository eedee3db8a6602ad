package queue

import (
	"context"
	"fmt"
)

// TaskSet is the executions that have a task in the stream: undelivered, or delivered and not
// settled. Such an execution is not stranded — a worker will run or resume it — whatever its
// state says.
type TaskSet struct {
	ids map[string]struct{}
	// Complete is false when the stream held more entries than the scan's limit: an execution
	// missing from the set may still have a task.
	Complete bool
	Read     int // entries read
}

// Has reports whether the tenant's execution has a task in the set.
func (s TaskSet) Has(tenant, executionID string) bool {
	_, ok := s.ids[tenant+"\x00"+executionID]
	return ok
}

// Tasks reads the whole stream, oldest first, at most limit entries, and collects the
// executions its tasks name. Entries that do not decode name none (they go to the dead letters
// on their delivery).
func (q *Queue) Tasks(ctx context.Context, limit int) (TaskSet, error) {
	set := TaskSet{ids: map[string]struct{}{}}
	start := "-"
	for {
		// Past the limit, one more entry is asked for: only its absence makes the set complete.
		want := max(min(findPage, limit-set.Read), 1)
		found, err := q.d.Range(ctx, q.stream, Span{Start: start, End: "+", Count: want})
		if err != nil {
			return TaskSet{}, fmt.Errorf("read the tasks: %w", err)
		}
		es := found[0]
		if set.Read >= limit {
			set.Complete = len(es) == 0
			return set, nil
		}
		for _, e := range es {
			if payload, ok := e.Fields[PayloadField]; ok {
				if env, _, err := Decode(q.stream, e.ID, []byte(payload)); err == nil && env.ExecutionID != "" {
					set.ids[env.Tenant()+"\x00"+env.ExecutionID] = struct{}{}
				}
			}
		}
		set.Read += len(es)
		if len(es) < want {
			set.Complete = true
			return set, nil
		}
		start = "(" + es[len(es)-1].ID
	}
}
