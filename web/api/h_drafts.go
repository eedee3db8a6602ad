package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"plaita/control"
)

// Flow drafts: the editor's working copies, one per flow, kept in the console database
// (control.Catalog). A draft need not be a valid flow; its revision is its ETag, and a save
// or a publication that names the revision it started from (If-Match) is refused with 412
// draft_changed when someone saved in between. They need no Redis, but publishing does.

type draftListIn struct {
	Cursor string `query:"cursor" maxLength:"4096" doc:"the next_cursor of the page before"`
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"50"` // control.MaxListLimit, control.DefaultListLimit
}

// DraftList is a page of the tenant's drafts by flow id, without their definitions.
type DraftList struct {
	TenantID string `json:"tenant_id"`
	control.Page[Draft]
}

type draftListOut struct{ Body DraftList }

func (a *API) listDrafts(ctx context.Context, c *Call, in *draftListIn) (*draftListOut, error) {
	p, err := a.catalog.Drafts(ctx, c.Tenant, in.Cursor, in.Limit)
	if err != nil {
		return nil, err
	}
	out := DraftList{TenantID: c.Tenant, Page: control.Page[Draft]{Items: make([]Draft, 0, len(p.Items)), NextCursor: p.Next}}
	for _, d := range p.Items {
		out.Items = append(out.Items, draftOf(d))
	}
	return &draftListOut{Body: out}, nil
}

type draftCreateIn struct {
	Body struct {
		FlowID     string          `json:"flow_id,omitempty" maxLength:"200" doc:"default: the definition's id"`
		Definition json.RawMessage `json:"definition" doc:"the definition as the editor has it (JSON; it need not be a valid flow yet)"`
	}
}

type draftOut struct {
	Status int
	ETag   string `header:"ETag" doc:"the draft's revision: send it as If-Match to save over exactly this revision"`
	Body   Draft
}

func (a *API) draftAnswer(c *Call, d control.Draft, status int) *draftOut {
	c.Audit.Target = d.FlowID
	c.Note("revision", d.Revision)
	return &draftOut{Status: status, ETag: strconv.Quote(strconv.FormatInt(d.Revision, 10)), Body: draftOf(d)}
}

func (a *API) createDraft(ctx context.Context, c *Call, in *draftCreateIn) (*draftOut, error) {
	c.Audit.Target = in.Body.FlowID
	d, err := a.catalog.SaveDraft(ctx, control.DraftSave{Tenant: c.Tenant, FlowID: in.Body.FlowID, Definition: in.Body.Definition,
		By: c.Principal.Actor, Create: true})
	if err != nil {
		return nil, err
	}
	return a.draftAnswer(c, d, http.StatusCreated), nil
}

type draftIDIn struct {
	ID string `path:"id" minLength:"1" maxLength:"200"`
}

func (a *API) getDraft(ctx context.Context, c *Call, in *draftIDIn) (*draftOut, error) {
	d, err := a.catalog.Draft(ctx, c.Tenant, in.ID)
	if err != nil {
		return nil, err
	}
	return &draftOut{Status: http.StatusOK, ETag: strconv.Quote(strconv.FormatInt(d.Revision, 10)), Body: draftOf(d)}, nil
}

type draftPutIn struct {
	ID      string `path:"id" minLength:"1" maxLength:"200"`
	IfMatch string `header:"If-Match" maxLength:"64" doc:"the revision the change started from (the draft's ETag): 412 draft_changed when the draft is at another one or is gone; without it the save is unconditional"`
	Body    struct {
		Definition json.RawMessage `json:"definition" doc:"the definition as the editor has it (JSON; it need not be a valid flow yet)"`
	}
}

// ifMatch reads an If-Match header as a draft revision (0 when there is none).
func ifMatch(h string) (int64, error) {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0, nil
	}
	h = strings.Trim(strings.TrimPrefix(h, "W/"), `"`)
	rev, err := strconv.ParseInt(h, 10, 64)
	if err != nil || rev < 1 {
		return 0, NewProblem(http.StatusBadRequest, "invalid_if_match", "If-Match must be a draft revision (its ETag, a positive integer)")
	}
	return rev, nil
}

// saveDraft creates the draft (without If-Match) or saves over the revision If-Match names.
func (a *API) saveDraft(ctx context.Context, c *Call, in *draftPutIn) (*draftOut, error) {
	c.Audit.Target = in.ID
	rev, err := ifMatch(in.IfMatch)
	if err != nil {
		return nil, err
	}
	if rev > 0 {
		c.Note("if_revision", rev)
	}
	d, err := a.catalog.SaveDraft(ctx, control.DraftSave{Tenant: c.Tenant, FlowID: in.ID, Definition: in.Body.Definition,
		By: c.Principal.Actor, IfRevision: rev})
	if err != nil {
		return nil, err
	}
	return a.draftAnswer(c, d, http.StatusOK), nil
}

func (a *API) deleteDraft(ctx context.Context, c *Call, in *draftIDIn) (*struct{}, error) {
	c.Audit.Target = in.ID
	return &struct{}{}, a.catalog.DeleteDraft(ctx, c.Tenant, in.ID)
}

type draftPublishIn struct {
	ID      string `path:"id" minLength:"1" maxLength:"200"`
	IfMatch string `header:"If-Match" maxLength:"64" doc:"the draft revision to publish (its ETag): 412 draft_changed when the draft is at another one"`
	Body    *struct {
		Version string `json:"version,omitempty" maxLength:"200" doc:"the version, when the definition names none (default: 12 hex digits of its hash)"`
	}
}

// DraftPublished is a draft published: what POST /api/flows answers, and the revision
// published.
type DraftPublished struct {
	FlowPublished
	DraftRevision int64 `json:"draft_revision"`
}

type draftPublishedOut struct {
	Status int
	Body   DraftPublished
}

// publishDraft publishes the draft's definition as POST /api/flows publishes one (the same
// checks, the same audit action, flow.publish, with the draft's revision); the draft stays.
func (a *API) publishDraft(ctx context.Context, c *Call, in *draftPublishIn) (*draftPublishedOut, error) {
	c.Audit.Target = in.ID
	rev, err := ifMatch(in.IfMatch)
	if err != nil {
		return nil, err
	}
	version := ""
	if in.Body != nil {
		version = in.Body.Version
	}
	pub, d, err := a.catalog.PublishDraft(ctx, c.Tenant, in.ID, rev, version, c.Principal.Actor)
	if err != nil {
		return nil, err
	}
	c.Note("draft_revision", d.Revision)
	status, body := a.published(c, pub)
	return &draftPublishedOut{Status: status, Body: DraftPublished{FlowPublished: body, DraftRevision: d.Revision}}, nil
}
