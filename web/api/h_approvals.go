package api

import (
	"context"
	"time"

	"plaita/control"
	"plaita/engine/state"
)

// Approvals: adapters over control's approval operations, the ones `plaita approval
// list|approve|reject` run. An answer is a checked resume of type approval that carries who
// gave it: the caller, so that who answered lands in the execution ($NODE.by) and in the
// audit row, whichever front end sent it.

type approvalListIn struct {
	Cursor string `query:"cursor" maxLength:"4096" doc:"the next_cursor of the page before"`
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"50"` // control.MaxListLimit, control.DefaultListLimit
}

// PendingApproval is an execution that waits for an answer at an approval node.
type PendingApproval struct {
	ExecutionID string       `json:"execution_id"`
	TenantID    string       `json:"tenant_id"`
	FlowID      string       `json:"flow_id"`
	FlowVersion string       `json:"flow_version"`
	Node        string       `json:"node"`
	Message     string       `json:"message,omitempty"`
	Since       time.Time    `json:"since"`
	Due         time.Time    `json:"due,omitzero"`
	Status      state.Status `json:"status"`
}

// ApprovalList is a page of the tenant's pending approvals, newest first. Pruned counts the
// index members removed on the way because their execution no longer waits there, Skipped
// those whose state could not be read.
type ApprovalList struct {
	TenantID string `json:"tenant_id"`
	control.Page[PendingApproval]
	Pruned  int `json:"pruned"`
	Skipped int `json:"skipped"`
}

type approvalListOut struct{ Body ApprovalList }

func (a *API) listApprovals(ctx context.Context, c *Call, in *approvalListIn) (*approvalListOut, error) {
	page, err := a.d.Plane.Approvals(ctx, c.Tenant, in.Cursor, in.Limit)
	out := ApprovalList{TenantID: c.Tenant, Page: control.Page[PendingApproval]{Items: make([]PendingApproval, 0, len(page.Items)),
		NextCursor: page.NextCursor}, Pruned: page.Pruned, Skipped: page.Skipped}
	for _, p := range page.Items {
		out.Items = append(out.Items, PendingApproval{ExecutionID: p.ExecutionID, TenantID: p.TenantID, FlowID: p.FlowID,
			FlowVersion: p.FlowVersion, Node: p.Node, Message: p.Message, Since: p.Since, Due: p.Due, Status: p.Status})
	}
	return &approvalListOut{Body: out}, err
}

type approvalAnswerIn struct {
	ID   string `path:"id" minLength:"1" maxLength:"200" doc:"the execution waiting for the answer"`
	Body struct {
		Approved bool   `json:"approved" doc:"true: the flow goes on; false: it takes on_reject, or ends in error"`
		Comment  string `json:"comment,omitempty" maxLength:"4096" doc:"the answer's comment ($NODE.comment)"`
	}
}

// answeredBy names the caller as the approver: a user's login, an API key's name, or
// "admin-key" for the platform admin key (a platform caller that is no user).
func answeredBy(p Principal) string {
	switch {
	case p.User != nil:
		return p.User.Login
	case p.Key != nil:
		return p.Key.Name
	case p.Platform:
		return "admin-key"
	}
	return p.Actor
}

// answerApproval checks the answer the way the worker will and enqueues it
// (control.AnswerApproval): an answer to an execution that no longer waits there is a 409
// with what is accepted instead.
func (a *API) answerApproval(ctx context.Context, c *Call, in *approvalAnswerIn) (*doneOut, error) {
	by := answeredBy(c.Principal)
	c.Audit.Target = in.ID
	c.Note("approved", in.Body.Approved)
	c.Note("by", by)
	if in.Body.Comment != "" {
		c.Note("comment_bytes", len(in.Body.Comment))
	}
	return done(a.d.Plane.AnswerApproval(ctx, control.Answer{Tenant: c.Tenant, ID: in.ID, Approved: in.Body.Approved,
		Comment: in.Body.Comment, By: by}))
}
