package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"plaita/control"
)

// Bulk jobs (docs/console.md, "Bulk jobs"): an adapter over control.Bulk. POST /api/jobs
// counts what a filter matches (dry_run) — exactly what the list with that filter shows — or
// creates a job that the console's runner applies item by item through the single-item
// operations; the job's progress and its per-item
// failures, with the refusal codes, are read back; a job can be cancelled. Everything is in
// the caller's tenant; the job is audited once, when it is created, not per item.

type jobCreateIn struct {
	Body struct {
		Action   control.BulkAction `json:"action" enum:"cancel,retry,delete,replay" doc:"cancel, retry or delete executions; replay dead letters"`
		Filter   control.BulkFilter `json:"filter,omitempty" doc:"what to act on, as the list's filter (GET /api/executions, GET /api/dead-letters): every field given must match; a field the action does not select by is a 400 naming it"`
		DryRun   bool               `json:"dry_run,omitempty" doc:"count what the filter matches and create nothing"`
		MaxItems int                `json:"max_items,omitempty" minimum:"0" maximum:"10000" doc:"act on at most this many (0: 10000)"`
	}
}

// JobCreated is what POST /api/jobs did: the selection (a dry run's answer), and the job it
// created unless it was a dry run.
type JobCreated struct {
	DryRun    bool                  `json:"dry_run"`
	Selection control.BulkSelection `json:"selection"`
	Job       *Job                  `json:"job,omitempty"`
}

type jobCreatedOut struct {
	Status int
	Body   JobCreated
}

func (a *API) createJob(ctx context.Context, c *Call, in *jobCreateIn) (*jobCreatedOut, error) {
	b := in.Body
	c.Note("action", b.Action)
	c.Note("filter", b.Filter)
	c.Note("dry_run", b.DryRun)
	if b.DryRun {
		c.Audit.Action = "job.dry_run" // a count: no job was created
	}
	// A bulk delete needs what a single delete needs: an admin when PLAITA_CONSOLE_ENV=prod.
	if b.Action == control.BulkDelete && a.s.Env == "prod" && !c.Role.AtLeast(TenantAdmin.role()) {
		return nil, NewProblem(http.StatusForbidden, "forbidden", "a bulk delete needs the admin role in tenant %s (PLAITA_CONSOLE_ENV=prod); you have %s", c.Tenant, roleName(c.Role))
	}
	// A bulk replay needs what a single replay needs (POST /api/dead-letters/{id}/replay): an admin.
	if b.Action == control.BulkReplay && !c.Role.AtLeast(TenantAdmin.role()) {
		return nil, NewProblem(http.StatusForbidden, "forbidden", "a bulk replay of dead letters needs the admin role in tenant %s, as a single replay does; you have %s", c.Tenant, roleName(c.Role))
	}
	sel, job, err := a.d.Jobs.Submit(ctx, control.BulkRequest{Tenant: c.Tenant, Action: b.Action, Filter: b.Filter, MaxItems: b.MaxItems},
		b.DryRun, c.Principal.Actor)
	if r := control.AsRefusal(err); r != nil && r.Code == "invalid_filter" && r.Fields["field"] != nil {
		// Name the field refused where huma names the body's fields it refuses.
		p := fromRefusal(r)
		p.Errors = append(p.Errors, &huma.ErrorDetail{Location: fmt.Sprintf("body.filter.%v", r.Fields["field"]), Message: r.Message})
		return nil, p
	}
	if err != nil {
		return nil, err
	}
	c.Note("count", sel.Count)
	c.Note("truncated", sel.Truncated)
	out := &jobCreatedOut{Status: http.StatusOK, Body: JobCreated{DryRun: b.DryRun, Selection: sel}}
	if job != nil {
		j := jobOf(*job)
		out.Body.Job = &j
		c.Audit.Target = job.ID
		out.Status = http.StatusCreated
	}
	return out, nil
}

type jobListIn struct {
	Cursor string `query:"cursor" maxLength:"2048" doc:"the next_cursor of the page before"`
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"50"` // control.MaxListLimit, control.DefaultListLimit
}

type jobListOut struct{ Body JobList }

func (a *API) listJobs(ctx context.Context, c *Call, in *jobListIn) (*jobListOut, error) {
	page, err := a.d.Jobs.Jobs(ctx, c.Tenant, in.Cursor, in.Limit)
	if err != nil {
		return nil, err
	}
	return &jobListOut{Body: jobListOf(page)}, nil
}

type jobGetIn struct {
	ID             string `path:"id" minLength:"1" maxLength:"100"`
	FailuresCursor string `query:"failures_cursor" maxLength:"2048" doc:"the failures.next_cursor of the answer before"`
	FailuresLimit  int    `query:"failures_limit" minimum:"1" maximum:"1000" default:"50"` // control.MaxListLimit, control.DefaultListLimit
}

// JobView is a job with a page of its failures.
type JobView struct {
	Job      Job         `json:"job"`
	Failures JobItemList `json:"failures" doc:"the items that failed, in order, with the refusal's code"`
}

type jobViewOut struct{ Body JobView }

func (a *API) getJob(ctx context.Context, c *Call, in *jobGetIn) (*jobViewOut, error) {
	job, err := a.d.Jobs.Job(ctx, c.Tenant, in.ID)
	if err != nil {
		return nil, err
	}
	failures, err := a.d.Jobs.ItemsInState(ctx, c.Tenant, in.ID, control.BulkItemFailed, in.FailuresCursor, in.FailuresLimit)
	if err != nil {
		return nil, err
	}
	return &jobViewOut{Body: JobView{Job: jobOf(job), Failures: jobItemsOf(failures)}}, nil
}

type jobItemsIn struct {
	ID     string `path:"id" minLength:"1" maxLength:"100"`
	State  string `query:"state" enum:"pending,applying,done,failed" doc:"only the items in this state"`
	Cursor string `query:"cursor" maxLength:"2048" doc:"the next_cursor of the page before"`
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"50"` // control.MaxListLimit, control.DefaultListLimit
}

type jobItemsOut struct{ Body JobItemList }

func (a *API) jobItems(ctx context.Context, c *Call, in *jobItemsIn) (*jobItemsOut, error) {
	page, err := a.d.Jobs.ItemsInState(ctx, c.Tenant, in.ID, in.State, in.Cursor, in.Limit)
	if err != nil {
		return nil, err
	}
	return &jobItemsOut{Body: jobItemsOf(page)}, nil
}

type jobIDIn struct {
	ID string `path:"id" minLength:"1" maxLength:"100"`
}

type jobOut struct{ Body Job }

func (a *API) cancelJob(ctx context.Context, c *Call, in *jobIDIn) (*jobOut, error) {
	c.Audit.Target = in.ID
	job, err := a.d.Jobs.Cancel(ctx, c.Tenant, in.ID)
	if err != nil {
		return nil, err
	}
	return &jobOut{Body: jobOf(job)}, nil
}

// registerJobRoutes adds the bulk job routes (routes.go calls it). They need Redis: a job acts
// on the control plane, and its runner runs only beside it.
func registerJobRoutes(a *API) {
	const get, post = http.MethodGet, http.MethodPost
	jobs := []string{"jobs"}
	register(a, Route{ID: "job-create", Method: post, Path: "/api/jobs",
		Summary: "Cancel, retry, delete or replay everything a filter matches, as a tracked job (dry_run: count only)",
		Tags:    jobs, Access: TenantEditor, Action: "job.create", Redis: true, Status: http.StatusCreated, MaxBody: 64 << 10}, a.createJob)
	register(a, Route{ID: "job-list", Method: get, Path: "/api/jobs", Summary: "List the tenant's jobs, newest first",
		Tags: jobs, Access: TenantViewer, Redis: true}, a.listJobs)
	register(a, Route{ID: "job-get", Method: get, Path: "/api/jobs/{id}", Summary: "Read a job: its progress and a page of its failures",
		Tags: jobs, Access: TenantViewer, Redis: true}, a.getJob)
	register(a, Route{ID: "job-items", Method: get, Path: "/api/jobs/{id}/items", Summary: "Page a job's items with what became of each",
		Tags: jobs, Access: TenantViewer, Redis: true}, a.jobItems)
	register(a, Route{ID: "job-cancel", Method: post, Path: "/api/jobs/{id}/cancel", Summary: "Cancel a job: no item is applied after the batch in hand",
		Tags: jobs, Access: TenantEditor, Action: "job.cancel", Redis: true}, a.cancelJob)
}
