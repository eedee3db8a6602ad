package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Bulk jobs (control/bulk.go): a job holds the items its filter matched when it was created
// (job_items, in order), and a runner works through them a batch at a time: ClaimJobItems takes
// the next pending items under the job's lease and marks them applying, RecordJobItems writes
// what became of each. An item is applied at most once: one a runner left applying when it died
// is not given out again but failed with the code "interrupted" (it may or may not have been
// applied) by the next claim. The lease (runner, lease_until) keeps two consoles on one database
// from running one job at once; a console that stops releases its leases, one that died lets
// them run out.

// JobItemState is where one item of a job is.
type JobItemState string

const (
	ItemPending  JobItemState = "pending"
	ItemApplying JobItemState = "applying"
	ItemDone     JobItemState = "done"
	ItemFailed   JobItemState = "failed"
)

// CodeInterrupted is the code of an item a runner took and never reported on.
const CodeInterrupted = "interrupted"

// MaxJobItems bounds the items of one job.
const MaxJobItems = 100000

// JobItem is one item of a job and what became of it.
type JobItem struct {
	Seq    int          `json:"seq"`
	Item   string       `json:"item" doc:"an execution id, or a dead letter's stream id"`
	State  JobItemState `json:"state" enum:"pending,applying,done,failed"`
	Result string       `json:"result,omitempty" doc:"what the operation did: cancel_requested, already_cancelled, enqueued, deleted, replayed …"`
	Code   string       `json:"code,omitempty" doc:"a failure's code: the refusal's (terminal, resume_refused …), interrupted, or error"`
	Error  string       `json:"error,omitempty"`
}

// JobItemOutcome is what became of one claimed item: done or failed with its result, code and
// error; pending gives it back unapplied (a runner that stops before it).
type JobItemOutcome struct {
	Seq    int
	State  JobItemState
	Result string
	Code   string
	Error  string
}

// JobRef names a job.
type JobRef struct {
	Tenant string
	ID     string
}

// CreateBulkJob records a job with its items, pending; truncated says the selection stopped at
// its bound.
func (db *DB) CreateBulkJob(ctx context.Context, nj NewJob, items []string, truncated bool) (Job, error) {
	if len(items) > MaxJobItems {
		return Job{}, invalid("a job of %d items: at most %d", len(items), MaxJobItems)
	}
	nj.Total = len(items)
	var j Job
	err := db.write(ctx, "create a bulk job", func(tx *sql.Tx) error {
		var err error
		if j, err = insertJob(ctx, tx, ms(db.now()), nj, truncated); err != nil {
			return err
		}
		// Rows of 200 at a time: one statement per item would cost a round trip through the
		// driver each.
		for from := 0; from < len(items); from += 200 {
			chunk := items[from:min(from+200, len(items))]
			args := make([]any, 0, 3*len(chunk))
			for i, it := range chunk {
				args = append(args, j.ID, from+i+1, cut(it, maxFailureItem))
			}
			q := "INSERT INTO job_items (job_id, seq, item) VALUES " + strings.TrimSuffix(strings.Repeat("(?, ?, ?), ", len(chunk)), ", ")
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return failed("create the items of job "+j.ID, err)
			}
		}
		return nil
	})
	return j, err
}

// ClaimJobItems takes up to n pending items of a job for runner, under a lease of the given
// length: the job becomes running, the items applying. It returns the job and no items when the
// job is finished (cancelled, completed, failed), or when nothing is left (the job is then
// completed); ErrJobLeased when another runner's lease has not run out. Items left applying by
// a runner that never reported are failed first (CodeInterrupted).
func (db *DB) ClaimJobItems(ctx context.Context, tenant, id, runner string, n int, lease time.Duration) (Job, []JobItem, error) {
	tenant, err := NormalizeTenant(tenant)
	if err != nil {
		return Job{}, nil, err
	}
	if runner == "" || n < 1 || lease <= 0 {
		return Job{}, nil, invalid("claim: a runner, a count and a lease are needed")
	}
	var j Job
	var items []JobItem
	err = db.write(ctx, "claim items of job "+id, func(tx *sql.Tx) error {
		owner, until, err := jobLease(ctx, tx, tenant, id)
		if err != nil {
			return err
		}
		now := db.now()
		if owner != "" && owner != runner && until > ms(now) {
			return fmt.Errorf("%w: job %s, by %s until %s", ErrJobLeased, id, owner, fromMS(until).Format(time.RFC3339))
		}
		if err := interruptItems(ctx, tx, id, ms(now)); err != nil {
			return err
		}
		if j, err = readJob(ctx, tx, tenant, id); err != nil || j.Status.Finished() {
			return err
		}
		if items, err = claimPending(ctx, tx, id, n); err != nil {
			return err
		}
		status, owner, until := JobRunning, runner, ms(now.Add(lease))
		if len(items) == 0 {
			status, owner, until = JobCompleted, "", 0
		}
		return setJob(ctx, tx, &j, now, "status = ?, runner = ?, lease_until = ?", string(status), owner, until)
	})
	return j, items, err
}

// jobLease is who runs a job of tenant, and until when (unix ms).
func jobLease(ctx context.Context, tx *sql.Tx, tenant, id string) (string, int64, error) {
	var owner string
	var until int64
	err := tx.QueryRowContext(ctx, "SELECT runner, lease_until FROM jobs WHERE id = ? AND tenant = ?", id, tenant).Scan(&owner, &until)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, fmt.Errorf("%w: %s in tenant %s", ErrJobNotFound, id, tenant)
	} else if err != nil {
		return "", 0, failed("read job "+id, err)
	}
	return owner, until, nil
}

// interruptItems fails the items a runner left applying.
func interruptItems(ctx context.Context, tx *sql.Tx, id string, now int64) error {
	res, err := tx.ExecContext(ctx, "UPDATE job_items SET state = 'failed', code = ?, error = ? WHERE job_id = ? AND state = 'applying'",
		CodeInterrupted, "the console running the job stopped while it applied this item: it may or may not have been applied; check it", id)
	if err != nil {
		return failed("interrupted items of job "+id, err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		if _, err := tx.ExecContext(ctx, "UPDATE jobs SET failed = failed + ?, updated_at = ? WHERE id = ?", n, now, id); err != nil {
			return failed("count the interrupted items of job "+id, err)
		}
	}
	return nil
}

// claimPending marks the next n pending items applying and returns them.
func claimPending(ctx context.Context, tx *sql.Tx, id string, n int) ([]JobItem, error) {
	items, err := queryAll(ctx, tx, "pending items of job "+id,
		"SELECT seq, item, state, result, code, error FROM job_items WHERE job_id = ? AND state = 'pending' ORDER BY seq LIMIT ?",
		[]any{id, n}, scanJobItem)
	if err != nil || len(items) == 0 {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE job_items SET state = 'applying' WHERE job_id = ? AND state = 'pending' AND seq BETWEEN ? AND ?",
		id, items[0].Seq, items[len(items)-1].Seq); err != nil {
		return nil, failed("claim items of job "+id, err)
	}
	for i := range items {
		items[i].State = ItemApplying
	}
	return items, nil
}

func scanJobItem(s scanner) (JobItem, error) {
	var it JobItem
	var st string
	err := s.Scan(&it.Seq, &it.Item, &st, &it.Result, &it.Code, &it.Error)
	it.State = JobItemState(st)
	return it, err
}

func readJob(ctx context.Context, tx *sql.Tx, tenant, id string) (Job, error) {
	j, err := scanJob(tx.QueryRowContext(ctx, "SELECT "+jobCols+" FROM jobs WHERE id = ? AND tenant = ?", id, tenant))
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, fmt.Errorf("%w: %s in tenant %s", ErrJobNotFound, id, tenant)
	}
	if err != nil {
		return Job{}, failed("read job "+id, err)
	}
	return j, nil
}

// setJob applies an assignment to the job row and reads it back into j.
func setJob(ctx context.Context, tx *sql.Tx, j *Job, now time.Time, set string, args ...any) error {
	if _, err := tx.ExecContext(ctx, "UPDATE jobs SET "+set+", updated_at = ? WHERE id = ?", append(args, ms(now), j.ID)...); err != nil {
		return failed("update job "+j.ID, err)
	}
	fresh, err := readJob(ctx, tx, j.Tenant, j.ID)
	*j = fresh
	return err
}

// RecordJobItems writes the outcomes of items runner claimed (those no longer applying — a
// runner whose lease ran out and whose items were interrupted — are left as they are), adds
// them to the job's counts and renews the lease; a running job with nothing left pending or
// applying is completed. It records into a cancelled job too: what was applied was applied.
func (db *DB) RecordJobItems(ctx context.Context, tenant, id, runner string, lease time.Duration, outcomes []JobItemOutcome) (Job, error) {
	tenant, err := NormalizeTenant(tenant)
	if err != nil {
		return Job{}, err
	}
	var j Job
	err = db.write(ctx, "record items of job "+id, func(tx *sql.Tx) error {
		var err error
		if j, err = readJob(ctx, tx, tenant, id); err != nil {
			return err
		}
		var done, failedN int64
		for _, o := range outcomes {
			switch o.State {
			case ItemDone, ItemFailed, ItemPending:
			default:
				return invalid("item %d: outcome %q: use done, failed or pending", o.Seq, o.State)
			}
			res, err := tx.ExecContext(ctx, "UPDATE job_items SET state = ?, result = ?, code = ?, error = ? WHERE job_id = ? AND seq = ? AND state = 'applying'",
				string(o.State), cut(o.Result, 64), cut(o.Code, 64), cut(o.Error, MaxJobFailureError), id, o.Seq)
			if err != nil {
				return failed("record item "+strconv.Itoa(o.Seq)+" of job "+id, err)
			}
			if n, _ := res.RowsAffected(); n == 1 && o.State == ItemDone {
				done++
			} else if n == 1 && o.State == ItemFailed {
				failedN++
			}
		}
		now := db.now()
		set, args := "succeeded = succeeded + ?, failed = failed + ?", []any{done, failedN}
		if owner, _, err := jobLease(ctx, tx, tenant, id); err != nil {
			return err
		} else if owner == runner {
			set, args = set+", lease_until = ?", append(args, ms(now.Add(lease)))
		}
		if err := setJob(ctx, tx, &j, now, set, args...); err != nil {
			return err
		}
		return completeIfDone(ctx, tx, &j, now)
	})
	return j, err
}

// completeIfDone completes a running job with no item pending or applying.
func completeIfDone(ctx context.Context, tx *sql.Tx, j *Job, now time.Time) error {
	if j.Status != JobRunning && j.Status != JobPending {
		return nil
	}
	var left int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM job_items WHERE job_id = ? AND state IN ('pending', 'applying')", j.ID).Scan(&left); err != nil {
		return failed("count the items left of job "+j.ID, err)
	}
	if left > 0 {
		return nil
	}
	return setJob(ctx, tx, j, now, "status = ?, runner = '', lease_until = 0", string(JobCompleted))
}

// ReleaseJob gives up runner's lease of a job (a console that stops), so the next runner need
// not wait for it to run out.
func (db *DB) ReleaseJob(ctx context.Context, tenant, id, runner string) error {
	tenant, err := NormalizeTenant(tenant)
	if err != nil {
		return err
	}
	if _, err := db.w.ExecContext(ctx, "UPDATE jobs SET runner = '', lease_until = 0 WHERE id = ? AND tenant = ? AND runner = ?", id, tenant, runner); err != nil {
		return failed("release job "+id, err)
	}
	return nil
}

// CancelJob cancels a pending or running job of the tenant: its runner applies no item after
// the batch it has in hand; the items left stay pending. A finished job is ErrJobFinished.
func (db *DB) CancelJob(ctx context.Context, tenant, id string) (Job, error) {
	tenant, err := NormalizeTenant(tenant)
	if err != nil {
		return Job{}, err
	}
	var j Job
	err = db.write(ctx, "cancel job "+id, func(tx *sql.Tx) error {
		var err error
		if j, err = readJob(ctx, tx, tenant, id); err != nil {
			return err
		}
		if j.Status.Finished() {
			return fmt.Errorf("%w: job %s is %s", ErrJobFinished, id, j.Status)
		}
		return setJob(ctx, tx, &j, db.now(), "status = ?", string(JobCancelled))
	})
	return j, err
}

// RunnableJobs are the jobs of every tenant a runner may claim now, oldest first: pending or
// running, with no live lease of another runner.
func (db *DB) RunnableJobs(ctx context.Context, runner string, limit int) ([]JobRef, error) {
	return queryAll(ctx, db.r, "runnable jobs",
		"SELECT tenant, id FROM jobs WHERE status IN ('pending', 'running') AND (runner = '' OR runner = ? OR lease_until <= ?) ORDER BY created_at, id LIMIT ?",
		[]any{runner, ms(db.now()), max(limit, 1)}, func(s scanner) (JobRef, error) {
			var r JobRef
			err := s.Scan(&r.Tenant, &r.ID)
			return r, err
		})
}

// JobItems pages the items of a job of the tenant in order, of one state when state is set
// (the failures: ItemFailed).
func (db *DB) JobItems(ctx context.Context, tenant, id string, state JobItemState, o ListOptions) (Page[JobItem], error) {
	if _, err := db.Job(ctx, tenant, id); err != nil {
		return Page[JobItem]{}, err
	}
	switch state {
	case "", ItemPending, ItemApplying, ItemDone, ItemFailed:
	default:
		return Page[JobItem]{}, invalid("item state %q: use pending, applying, done or failed", state)
	}
	limit, err := pageLimit(o.Limit, DefaultLimit, MaxLimit)
	if err != nil {
		return Page[JobItem]{}, err
	}
	after, err := decodeCursor("job_items:"+id, o.Cursor, 1)
	if err != nil {
		return Page[JobItem]{}, err
	}
	q, args := "SELECT seq, item, state, result, code, error FROM job_items WHERE job_id = ?", []any{id}
	if state != "" {
		q, args = q+" AND state = ?", append(args, string(state))
	}
	if after != nil {
		seq, err := strconv.Atoi(after[0])
		if err != nil {
			return Page[JobItem]{}, fmt.Errorf("%w: bad seq", ErrBadCursor)
		}
		q, args = q+" AND seq > ?", append(args, seq)
	}
	rows, err := queryAll(ctx, db.r, "items of job "+id, q+" ORDER BY seq LIMIT ?", append(args, limit+1), scanJobItem)
	if err != nil {
		return Page[JobItem]{}, err
	}
	return page(rows, limit, "job_items:"+id, func(it JobItem) []string { return []string{strconv.Itoa(it.Seq)} }), nil
}
