package store

import (
	"context"

	"plaita/store/keys"
)

// ListDriver is what the listings read (list.go, approvals.go): a tenant's execution index or
// the list of one indexed value, page by page newest first, the states they name, and the
// pending-approval index with its records. The Redis driver (redisLists) is the cluster's;
// store/sqlite's is local mode's; storetest's ListContract holds both.
type ListDriver interface {
	// Source picks what a listing reads: the tenant's index (no terms), or the list of the
	// term with the fewest members (Empty: that list is empty, nothing matches).
	Source(ctx context.Context, sp keys.Space, terms []IndexTerm) (ListSource, error)
	// Rows reads up to n rows of src after the cursor (the last row a page examined; zero:
	// from the top), newest first (score, then member, descending), leaving out the scores at
	// or above above ("" none).
	Rows(ctx context.Context, sp keys.Space, src ListSource, after ListRow, n int, above string) ([]ListRow, error)
	// States reads the state bytes of ids (nil: none, or not a state).
	States(ctx context.Context, sp keys.Space, ids []string) ([][]byte, error)
	// ApprovalReads reads, for each id, its approval record and its state (nil: none; …Bad:
	// something else is stored there).
	ApprovalReads(ctx context.Context, sp keys.Space, ids []string) ([]ApprovalRead, error)
	// PruneApprovals removes the approval index members whose score is still the one given and
	// says how many.
	PruneApprovals(ctx context.Context, sp keys.Space, rows []ListRow) (int64, error)
}

// ListSource is what a listing reads: the tenant's index (Term nil) or an indexed value's list
// (Approvals: the pending-approval index).
type ListSource struct {
	Term      *IndexTerm
	Approvals bool
	Empty     bool
}

// ListRow is one member of a list with its score.
type ListRow struct {
	Member string
	Score  float64
}

// ApprovalRead is an approval index member's record and state.
type ApprovalRead struct {
	Record, State       []byte
	RecordBad, StateBad bool
}
