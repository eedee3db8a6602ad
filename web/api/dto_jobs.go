package api

import (
	"time"

	"plaita/control"
)

// The wire types of the bulk job routes (h_jobs.go): the console's own, copied field by field
// from control's results.

// Job is a bulk job: what it does to what, and how far it got.
type Job struct {
	ID        string             `json:"id"`
	TenantID  string             `json:"tenant_id"`
	Action    control.BulkAction `json:"action"`
	Filter    control.BulkFilter `json:"filter"`
	Status    string             `json:"status" enum:"pending,running,completed,failed,cancelled"`
	Total     int                `json:"total"`
	Succeeded int                `json:"succeeded"`
	Failed    int                `json:"failed"`
	Remaining int                `json:"remaining" doc:"items not applied yet (a cancelled job leaves them so)"`
	Truncated bool               `json:"truncated" doc:"the selection stopped at a bound: more may match the filter"`
	CreatedBy string             `json:"created_by,omitempty"`
	CreatedAt time.Time          `json:"created_at"`
	UpdatedAt time.Time          `json:"updated_at"`
}

func jobOf(j control.BulkJob) Job {
	return Job{ID: j.ID, TenantID: j.TenantID, Action: j.Action, Filter: j.Filter, Status: string(j.Status), Total: j.Total,
		Succeeded: j.Succeeded, Failed: j.Failed, Remaining: j.Remaining, Truncated: j.Truncated, CreatedBy: j.CreatedBy,
		CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt}
}

// JobList is a page of the tenant's jobs, newest first.
type JobList struct {
	control.Page[Job]
}

func jobListOf(p control.BulkJobPage) JobList {
	l := JobList{Page: control.Page[Job]{Items: make([]Job, 0, len(p.Items)), NextCursor: p.Next}}
	for _, j := range p.Items {
		l.Items = append(l.Items, jobOf(j))
	}
	return l
}

// JobItem is one item of a job and what became of it.
type JobItem struct {
	Seq    int    `json:"seq"`
	Item   string `json:"item" doc:"an execution id, or a dead letter's stream id"`
	State  string `json:"state" enum:"pending,applying,done,failed"`
	Result string `json:"result,omitempty" doc:"what the operation did: cancel_requested, already_cancelled, enqueued, deleted, replayed …"`
	Code   string `json:"code,omitempty" doc:"a failure's code: the refusal's (terminal, resume_refused …), interrupted, or error"`
	Error  string `json:"error,omitempty"`
}

// JobItemList is a page of a job's items, in order.
type JobItemList struct {
	JobID string `json:"job_id"`
	control.Page[JobItem]
}

func jobItemsOf(p control.BulkItemPage) JobItemList {
	l := JobItemList{JobID: p.JobID, Page: control.Page[JobItem]{Items: make([]JobItem, 0, len(p.Items)), NextCursor: p.Next}}
	for _, it := range p.Items {
		l.Items = append(l.Items, JobItem{Seq: it.Seq, Item: it.Item, State: string(it.State), Result: it.Result, Code: it.Code, Error: it.Error})
	}
	return l
}
