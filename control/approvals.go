package control

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"plaita/engine"
	"plaita/model"
	"plaita/store"
)

// Approvals: the pending approvals of a tenant, and their answer. An answer is a resume of type
// approval carrying who gave it, so it lands in the execution's context ($NODE.by) and timeline
// whichever front end sent it; it goes through Resume's check, so an answer the worker would
// refuse (the execution moved on, the flow changed) is refused here the same way.

// maxAnswerText bounds an answer's comment and its approver's name: they are written into the
// execution's context.
const (
	maxCommentBytes = 4096
	maxByBytes      = 200
)

// Approvals is one page of the tenant's pending approvals, newest first.
func (p *Plane) Approvals(ctx context.Context, tenant, cursor string, limit int) (store.ApprovalPage, error) {
	if err := checkLimit(cmp.Or(limit, DefaultListLimit), MaxListLimit); err != nil {
		return store.ApprovalPage{}, err
	}
	ts, err := p.tenantStore(tenant)
	if err != nil {
		return store.ApprovalPage{}, err
	}
	page, err := ts.Approvals(ctx, cursor, limit)
	if errors.Is(err, store.ErrInvalid) {
		return page, refuse(Invalid, "invalid_cursor", err, "cursor: %v", err)
	}
	return page, err
}

// WaitApprovals is Approvals once the page has an approval, or at timeout (the empty page and
// an error): `plaita approval list --wait`, for a script that answers what a flow asks. A
// timeout of 0 or less reads once, as Approvals.
func (p *Plane) WaitApprovals(ctx context.Context, tenant, cursor string, limit int, timeout time.Duration) (store.ApprovalPage, error) {
	if timeout <= 0 {
		return p.Approvals(ctx, tenant, cursor, limit)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		page, err := p.Approvals(ctx, tenant, cursor, limit)
		switch {
		case err == nil && len(page.Items) > 0:
			return page, nil
		case err != nil && (ctx.Err() != nil || !model.IsTransient(err)):
			return page, err
		}
		select {
		case <-ctx.Done():
			return page, fmt.Errorf("no approval pending after %s (--timeout %s)", RoundDuration(timeout), strconv.FormatFloat(timeout.Seconds(), 'f', -1, 64))
		case <-time.After(waitPollInterval):
		}
	}
}

// Answer is an approver's answer.
type Answer struct {
	Tenant   string
	ID       string
	Approved bool
	Comment  string
	// By names who answered (a console user, an API key's name, the CLI's user); required.
	By string
}

// AnswerApproval checks and enqueues the answer of a pending approval.
func (p *Plane) AnswerApproval(ctx context.Context, a Answer) (Done, error) {
	data, err := answerData(a)
	if err != nil {
		return Done{}, err
	}
	return p.Resume(ctx, ResumeRequest{Tenant: a.Tenant, ID: a.ID, Type: engine.ResumeApproval, Data: data})
}

// answerData is an answer as the approval node takes it, checked.
func answerData(a Answer) (json.RawMessage, error) {
	by := strings.TrimSpace(a.By)
	switch {
	case by == "":
		return nil, refuse(Invalid, "invalid_answer", nil, "an answer names who gives it")
	case len(by) > maxByBytes:
		return nil, refuse(Invalid, "invalid_answer", nil, "the approver's name is %d bytes; at most %d", len(by), maxByBytes)
	case len(a.Comment) > maxCommentBytes:
		return nil, refuse(Invalid, "invalid_answer", nil, "the comment is %d bytes; at most %d", len(a.Comment), maxCommentBytes)
	}
	data, err := json.Marshal(map[string]any{"approved": a.Approved, "comment": a.Comment, "by": by})
	if err != nil {
		return nil, fmt.Errorf("answer of %s: %w", a.ID, err)
	}
	return data, nil
}
