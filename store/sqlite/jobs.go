package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// Jobs are the console's bulk operations by filter (cancel, delete, resume … every execution
// that matches): created pending, run by the console, which records their progress, per-item
// failures and end here. A job belongs to one tenant; every method takes it, so a tenant never
// reads or changes another's jobs.

// JobStatus is where a job is.
type JobStatus string

const (
	JobPending   JobStatus = "pending"
	JobRunning   JobStatus = "running"
	JobCompleted JobStatus = "completed"
	JobFailed    JobStatus = "failed"
	JobCancelled JobStatus = "cancelled"
)

// Finished reports whether the job is over (completed, failed or cancelled).
func (s JobStatus) Finished() bool { return s == JobCompleted || s == JobFailed || s == JobCancelled }

// ParseJobStatus reads a job status.
func ParseJobStatus(s string) (JobStatus, error) {
	switch st := JobStatus(s); st {
	case JobPending, JobRunning, JobCompleted, JobFailed, JobCancelled:
		return st, nil
	}
	return "", invalid("job status %q: use pending, running, completed, failed or cancelled", s)
}

// JobFailure is one item a job could not do.
type JobFailure struct {
	Item  string `json:"item"` // e.g. an execution id
	Error string `json:"error"`
}

// Job is one bulk operation.
type Job struct {
	ID     string          `json:"id"`
	Tenant string          `json:"tenant"`
	Kind   string          `json:"kind"`   // e.g. executions.cancel
	Filter json.RawMessage `json:"filter"` // the selection, as the console took it (a JSON object)
	DryRun bool            `json:"dry_run"`
	Status JobStatus       `json:"status"`
	// Total is how many items the filter matched; Succeeded and Failed how many are done.
	Total     int `json:"total"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	// Failures are the first MaxJobFailures failed items (not filled by ListJobs); the others
	// are only counted, in FailuresDropped.
	Failures        []JobFailure `json:"failures,omitempty"`
	FailuresDropped int          `json:"failures_dropped"`
	Error           string       `json:"error,omitempty"` // why a failed job failed
	// Truncated: the selection of a bulk job stopped at its bound (control/bulk.go); more
	// items may match than the job has.
	Truncated bool      `json:"truncated"`
	CreatedBy string    `json:"created_by,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Bounds of a job.
const (
	MaxJobFailures     = 1000
	MaxJobFilter       = 64 << 10
	maxFailureItem     = 256
	MaxJobFailureError = 1024 // the bytes of a failure's error a job keeps
)

var jobKindRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

// NewJob is what CreateJob takes.
type NewJob struct {
	Tenant    string
	Kind      string          // lower-case letters, digits and _ . - (at most 64)
	Filter    json.RawMessage // a JSON object of at most MaxJobFilter bytes ("" is {})
	DryRun    bool
	Total     int // what the filter matched, when known (0 otherwise)
	CreatedBy string
}

const jobCols = "id, tenant, kind, filter, dry_run, status, total, succeeded, failed, failures, failures_dropped, error, truncated, created_by, created_at, updated_at"

func scanJob(s scanner) (Job, error) {
	var j Job
	var filter, status, failures string
	var created, updated int64
	if err := s.Scan(&j.ID, &j.Tenant, &j.Kind, &filter, &j.DryRun, &status, &j.Total, &j.Succeeded, &j.Failed,
		&failures, &j.FailuresDropped, &j.Error, &j.Truncated, &j.CreatedBy, &created, &updated); err != nil {
		return Job{}, err
	}
	j.Filter, j.Status, j.CreatedAt, j.UpdatedAt = json.RawMessage(filter), JobStatus(status), fromMS(created), fromMS(updated)
	if err := json.Unmarshal([]byte(failures), &j.Failures); err != nil {
		return Job{}, fmt.Errorf("job %s: failures column: %w", j.ID, err)
	}
	return j, nil
}

// CreateJob records a new job, pending.
func (db *DB) CreateJob(ctx context.Context, nj NewJob) (Job, error) {
	var j Job
	err := db.write(ctx, "create a job", func(tx *sql.Tx) (err error) {
		j, err = insertJob(ctx, tx, ms(db.now()), nj, false)
		return err
	})
	return j, err
}

// insertJob checks nj and inserts it, pending.
func insertJob(ctx context.Context, tx *sql.Tx, now int64, nj NewJob, truncated bool) (Job, error) {
	tenant, err := NormalizeTenant(nj.Tenant)
	if err != nil {
		return Job{}, err
	}
	if !jobKindRe.MatchString(nj.Kind) {
		return Job{}, invalid("job kind %q: use lower-case letters, digits and _ . - (at most 64)", nj.Kind)
	}
	if nj.Total < 0 {
		return Job{}, invalid("job total %d is negative", nj.Total)
	}
	filter := "{}"
	if len(bytes.TrimSpace(nj.Filter)) > 0 {
		var buf bytes.Buffer
		if len(nj.Filter) > MaxJobFilter || json.Compact(&buf, nj.Filter) != nil || buf.Bytes()[0] != '{' {
			return Job{}, invalid("job filter: use a JSON object of at most %d bytes", MaxJobFilter)
		}
		filter = buf.String()
	}
	j, err := scanJob(tx.QueryRowContext(ctx,
		"INSERT INTO jobs (id, tenant, kind, filter, dry_run, status, total, succeeded, failed, failures, failures_dropped, error, truncated, created_by, created_at, updated_at) "+
			"VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0, '[]', 0, '', ?, ?, ?, ?) RETURNING "+jobCols,
		newID("job"), tenant, nj.Kind, filter, nj.DryRun, string(JobPending), nj.Total, truncated, cut(nj.CreatedBy, 254), now, now))
	if err != nil {
		return Job{}, failed("create a job", err)
	}
	return j, nil
}

// JobUpdate is a change to a job; its zero value changes nothing but UpdatedAt.
type JobUpdate struct {
	Status JobStatus // "" keeps it
	Total  *int      // nil keeps it
	// AddSucceeded and AddFailed are added to the counts (concurrent updates add up).
	AddSucceeded int
	AddFailed    int
	// Failures are appended to the job's (cut to MaxJobFailures; the rest are counted).
	Failures []JobFailure
	Error    string // "" keeps it
}

// UpdateJob applies an update to a job of the tenant. A finished job refuses every update
// (ErrJobFinished), an unknown one is ErrJobNotFound.
func (db *DB) UpdateJob(ctx context.Context, tenant, id string, u JobUpdate) (Job, error) {
	tenant, err := NormalizeTenant(tenant)
	if err != nil {
		return Job{}, err
	}
	if u.Status != "" {
		if _, err := ParseJobStatus(string(u.Status)); err != nil {
			return Job{}, err
		}
	}
	if u.AddSucceeded < 0 || u.AddFailed < 0 || u.Total != nil && *u.Total < 0 {
		return Job{}, invalid("job counts cannot go down")
	}
	var j Job
	err = db.write(ctx, "update job "+id, func(tx *sql.Tx) error {
		var err error
		j, err = scanJob(tx.QueryRowContext(ctx, "SELECT "+jobCols+" FROM jobs WHERE id = ? AND tenant = ?", id, tenant))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %s in tenant %s", ErrJobNotFound, id, tenant)
		}
		if err != nil {
			return failed("read job "+id, err)
		}
		if j.Status.Finished() {
			return fmt.Errorf("%w: job %s is %s", ErrJobFinished, id, j.Status)
		}
		if u.Status != "" {
			j.Status = u.Status
		}
		if u.Total != nil {
			j.Total = *u.Total
		}
		j.Succeeded += u.AddSucceeded
		j.Failed += u.AddFailed
		for _, f := range u.Failures {
			if len(j.Failures) >= MaxJobFailures {
				j.FailuresDropped++
				continue
			}
			j.Failures = append(j.Failures, JobFailure{Item: cut(f.Item, maxFailureItem), Error: cut(f.Error, MaxJobFailureError)})
		}
		if u.Error != "" {
			j.Error = cut(u.Error, MaxJobFailureError)
		}
		failures, err := json.Marshal(j.Failures)
		if err != nil {
			return invalid("job failures: %v", err)
		}
		if j.Failures == nil {
			failures = []byte("[]")
		}
		now := db.now()
		j.UpdatedAt = now
		if _, err := tx.ExecContext(ctx,
			"UPDATE jobs SET status = ?, total = ?, succeeded = ?, failed = ?, failures = ?, failures_dropped = ?, error = ?, updated_at = ? WHERE id = ?",
			string(j.Status), j.Total, j.Succeeded, j.Failed, string(failures), j.FailuresDropped, j.Error, ms(now), id); err != nil {
			return failed("update job "+id, err)
		}
		return nil
	})
	return j, err
}

// Job reads a job of the tenant; ErrJobNotFound when the tenant has none by that id.
func (db *DB) Job(ctx context.Context, tenant, id string) (Job, error) {
	tenant, err := NormalizeTenant(tenant)
	if err != nil {
		return Job{}, err
	}
	j, err := scanJob(db.r.QueryRowContext(ctx, "SELECT "+jobCols+" FROM jobs WHERE id = ? AND tenant = ?", id, tenant))
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, fmt.Errorf("%w: %s in tenant %s", ErrJobNotFound, id, tenant)
	}
	if err != nil {
		return Job{}, failed("read job "+id, err)
	}
	return j, nil
}

// ListJobs pages a tenant's jobs, newest first, without their failures (Job has them).
func (db *DB) ListJobs(ctx context.Context, tenant string, o ListOptions) (Page[Job], error) {
	tenant, err := NormalizeTenant(tenant)
	if err != nil {
		return Page[Job]{}, err
	}
	limit, err := pageLimit(o.Limit, DefaultLimit, MaxLimit)
	if err != nil {
		return Page[Job]{}, err
	}
	after, err := decodeCursor("jobs", o.Cursor, 2)
	if err != nil {
		return Page[Job]{}, err
	}
	cols := "id, tenant, kind, filter, dry_run, status, total, succeeded, failed, '[]', failures_dropped, error, truncated, created_by, created_at, updated_at"
	q, args := "SELECT "+cols+" FROM jobs WHERE tenant = ?", []any{tenant}
	if after != nil {
		at, err := strconv.ParseInt(after[0], 10, 64)
		if err != nil {
			return Page[Job]{}, fmt.Errorf("%w: bad time", ErrBadCursor)
		}
		q, args = q+" AND (created_at, id) < (?, ?)", append(args, at, after[1])
	}
	rows, err := queryAll(ctx, db.r, "list jobs", q+" ORDER BY created_at DESC, id DESC LIMIT ?", append(args, limit+1), scanJob)
	if err != nil {
		return Page[Job]{}, err
	}
	return page(rows, limit, "jobs", func(j Job) []string { return []string{strconv.FormatInt(ms(j.CreatedAt), 10), j.ID} }), nil
}
