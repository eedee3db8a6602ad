package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"plaita/engine"
	"plaita/store"
	"plaita/store/sqlite"
)

// The console's record of flows beside Redis (docs/console.md, "Flows, drafts and versions"):
// drafts — what the editor saves, valid or not, one per flow, with a revision that moves on at
// every save — and every version the console published, with who published it and when (the
// record the engine sync writes back to Redis, engine_sync.go). Publishing goes through
// Plane.PublishFlow, as the CLI's does; the record is written after Redis took the version.

// FlowRecords is where drafts and version records are kept (store/sqlite's DB).
type FlowRecords interface {
	SaveDraft(ctx context.Context, s sqlite.DraftSave) (sqlite.Draft, error)
	Draft(ctx context.Context, tenant, flowID string) (sqlite.Draft, error)
	ListDrafts(ctx context.Context, tenant string, o sqlite.ListOptions) (sqlite.Page[sqlite.Draft], error)
	DeleteDraft(ctx context.Context, tenant, flowID string) error
	RecordVersion(ctx context.Context, v sqlite.FlowVersion) (sqlite.FlowVersion, bool, error)
	ListVersions(ctx context.Context, tenant, flowID string, o sqlite.ListOptions) (sqlite.Page[sqlite.FlowVersion], error)
	AllVersions(ctx context.Context, o sqlite.ListOptions) (sqlite.Page[sqlite.FlowVersion], error)
}

// Catalog is the console's flow operations that involve its database. Its plane may be nil
// (the console has no Redis and no local mode): drafts still work; publishing and reading
// published flows do not.
type Catalog struct {
	db    FlowRecords
	plane Publisher
}

// Publisher publishes and reads flows: the Plane over Redis, or local mode's Local (which keeps
// its flows in the records themselves).
type Publisher interface {
	PublishFlow(ctx context.Context, tenant string, def []byte, version string) (Published, error)
	Flow(ctx context.Context, tenant, flowID, version string) (FlowShown, error)
}

// NewCatalog returns the catalog over db and plane (nil: no publication).
func NewCatalog(db FlowRecords, plane Publisher) *Catalog { return &Catalog{db: db, plane: plane} }

// errNoPlane is a publication asked of a catalog without Redis.
var errNoPlane = fmt.Errorf("%w: the console has no Redis", store.ErrRedis)

// recordErr maps the console database's refusals of drafts and records to refusals (the rest,
// a failing database, as they are).
func recordErr(err error, flowID string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sqlite.ErrDraftNotFound):
		return refuse(NotFound, "draft_not_found", err, "flow %s has no draft", flowID)
	case errors.Is(err, sqlite.ErrDraftExists):
		r := refuse(Conflict, "draft_exists", err, "flow %s has a draft already", flowID)
		r.Unblock = "save over it with PUT /api/flows/drafts/" + flowID + " (If-Match: its revision)"
		return r
	case errors.Is(err, sqlite.ErrDraftChanged):
		r := refuse(Stale, "draft_changed", err, "%v", err)
		r.Unblock = "read the draft again (its revision is its ETag), reapply the change and save with that revision"
		return r
	case errors.Is(err, sqlite.ErrBadCursor):
		return refuse(Invalid, "invalid_cursor", err, "cursor: %v", err)
	case errors.Is(err, store.ErrInvalid) && !errors.Is(err, sqlite.ErrDB):
		return refuse(Invalid, "invalid_draft", err, "%v", err)
	}
	return err
}

// DraftSave saves a draft: the flow id is the definition's "id" when none is given; a
// definition naming another id than the draft's is refused (publishing it would publish
// another flow).
type DraftSave struct {
	Tenant     string
	FlowID     string
	Definition json.RawMessage
	By         string
	// IfRevision is the revision the editor started from (If-Match): a Stale refusal
	// "draft_changed" when the draft is at another one or does not exist. 0: any.
	IfRevision int64
	// Create makes a new draft only: Conflict "draft_exists" when the flow has one.
	Create bool
}

// SaveDraft creates or replaces a draft (not validated: a draft need not be a valid flow yet).
func (c *Catalog) SaveDraft(ctx context.Context, s DraftSave) (sqlite.Draft, error) {
	id, err := draftFlowID(s.FlowID, s.Definition)
	if err != nil {
		return sqlite.Draft{}, err
	}
	d, err := c.db.SaveDraft(ctx, sqlite.DraftSave{Tenant: s.Tenant, FlowID: id, Definition: s.Definition, By: s.By,
		IfRevision: s.IfRevision, Create: s.Create})
	return d, recordErr(err, id)
}

// draftFlowID is the flow id of a draft: id, the definition's own when id is "", and the two
// must agree when both are given.
func draftFlowID(id string, def json.RawMessage) (string, error) {
	var head struct {
		ID any `json:"id"`
	}
	if t := bytes.TrimSpace(def); len(t) > 0 && t[0] == '{' {
		_ = json.Unmarshal(t, &head) // a draft need not be valid JSON of a flow: store/sqlite refuses what is not JSON
	}
	own, _ := head.ID.(string)
	switch {
	case id == "" && own == "":
		return "", refuse(Invalid, "invalid_draft", nil, `the draft needs a flow id: give flow_id, or an "id" in the definition`)
	case id == "":
		return own, nil
	case own != "" && own != id:
		return "", refuse(Invalid, "draft_id_mismatch", nil, "the definition's id is %q, not the draft's %q", own, id)
	}
	return id, nil
}

// Draft reads a draft with its definition.
func (c *Catalog) Draft(ctx context.Context, tenant, flowID string) (sqlite.Draft, error) {
	d, err := c.db.Draft(ctx, tenant, flowID)
	return d, recordErr(err, flowID)
}

// Drafts pages the tenant's drafts by flow id, without their definitions.
func (c *Catalog) Drafts(ctx context.Context, tenant, cursor string, limit int) (sqlite.Page[sqlite.Draft], error) {
	p, err := c.db.ListDrafts(ctx, tenant, sqlite.ListOptions{Cursor: cursor, Limit: limit})
	return p, recordErr(err, "")
}

// DeleteDraft deletes a draft; the versions published from it stay.
func (c *Catalog) DeleteDraft(ctx context.Context, tenant, flowID string) error {
	return recordErr(c.db.DeleteDraft(ctx, tenant, flowID), flowID)
}

// PublishRequest publishes a definition (Plane.PublishFlow) and records who did.
type PublishRequest struct {
	Tenant     string
	Definition json.RawMessage
	Version    string // "" for the definition's own, else 12 hex digits of its hash
	By         string
}

// FlowPublished is what Publish did.
type FlowPublished struct {
	Published
	Hash string
	// Record is the console database's record of the version; RecordErr why it could not be
	// written (Redis has the version all the same: the workers run it).
	Record    sqlite.FlowVersion
	RecordErr error
}

// Publish publishes req's definition as an immutable version and records it.
func (c *Catalog) Publish(ctx context.Context, req PublishRequest) (FlowPublished, error) {
	if c.plane == nil {
		return FlowPublished{}, errNoPlane
	}
	pub, err := c.plane.PublishFlow(ctx, req.Tenant, req.Definition, req.Version)
	if err != nil {
		return FlowPublished{}, err
	}
	out := FlowPublished{Published: pub}
	if out.Hash, err = engine.FlowHash(req.Definition); err != nil {
		return FlowPublished{}, err
	}
	out.Record, _, out.RecordErr = c.db.RecordVersion(ctx, sqlite.FlowVersion{Tenant: req.Tenant, FlowID: pub.Flow.ID, Version: pub.Version,
		Definition: req.Definition, Hash: out.Hash, HashAlgo: pub.Flow.HashAlgo, PublishedBy: req.By})
	return out, nil
}

// PublishDraft publishes the tenant's draft of flowID (at revision ifRevision, when above 0) as
// Publish does; the draft stays, for the next change.
func (c *Catalog) PublishDraft(ctx context.Context, tenant, flowID string, ifRevision int64, version, by string) (FlowPublished, sqlite.Draft, error) {
	d, err := c.Draft(ctx, tenant, flowID)
	if err != nil {
		return FlowPublished{}, sqlite.Draft{}, err
	}
	if ifRevision > 0 && d.Revision != ifRevision {
		return FlowPublished{}, d, recordErr(fmt.Errorf("%w: %s is at revision %d, not %d", sqlite.ErrDraftChanged, flowID, d.Revision, ifRevision), flowID)
	}
	if _, err := draftFlowID(flowID, d.Definition); err != nil {
		return FlowPublished{}, d, err
	}
	pub, err := c.Publish(ctx, PublishRequest{Tenant: tenant, Definition: d.Definition, Version: version, By: by})
	if err == nil && pub.Flow.ID != flowID {
		// A definition without an id of its own cannot parse; this is a guard, not a path.
		err = refuse(Invalid, "draft_id_mismatch", nil, "the draft of %s publishes flow %s", flowID, pub.Flow.ID)
	}
	return pub, d, err
}

// VersionShown is one version of a flow: as Redis has it (the workers run it) and as the
// console recorded it (who published it).
type VersionShown struct {
	store.FlowVersion
	// PublishedBy is who published it through the console ("" when the console has no record:
	// the CLI published it).
	PublishedBy string `json:"published_by,omitempty"`
	Seq         int64  `json:"seq,omitempty" doc:"its place in the console's record (1 for the first version the console published)"`
	Hash        string `json:"flow_hash,omitempty"`
	// Engine: Redis has it; a version the console recorded that Redis lost is listed with false
	// (the engine sync at the console's start writes it back).
	Engine bool `json:"engine"`
	// Recorded: the console's database has it.
	Recorded bool `json:"recorded"`
}

// maxVersionRecords bounds the records read beside a flow's versions (sqlite.MaxLimit).
const maxVersionRecords = sqlite.MaxLimit

// Flow is Plane.Flow with the console's records of the versions (who published each, and
// those Redis lost).
func (c *Catalog) Flow(ctx context.Context, tenant, flowID, version string) (FlowShown, error) {
	if c.plane == nil {
		return FlowShown{}, errNoPlane
	}
	out, err := c.plane.Flow(ctx, tenant, flowID, version)
	if err != nil {
		return out, err
	}
	recs, err := c.db.ListVersions(ctx, out.TenantID, flowID, sqlite.ListOptions{Limit: maxVersionRecords})
	if err != nil {
		return FlowShown{}, err
	}
	out.Versions = mergeVersions(out.Versions, recs.Items)
	return out, nil
}

// mergeVersions joins Redis's versions with the records, newest first.
func mergeVersions(inRedis []VersionShown, recs []sqlite.FlowVersion) []VersionShown {
	out := inRedis
	byVersion := map[string]int{}
	for i, v := range out {
		byVersion[v.Version] = i
	}
	for _, r := range recs {
		i, ok := byVersion[r.Version]
		if !ok {
			out = append(out, VersionShown{FlowVersion: store.FlowVersion{Version: r.Version, PublishedAt: r.PublishedAt}})
			i = len(out) - 1
		}
		v := &out[i]
		v.PublishedBy, v.Seq, v.Hash, v.Recorded = r.PublishedBy, r.Seq, r.Hash, true
	}
	sortVersions(out)
	return out
}

// sortVersions orders versions newest first (ties by version, descending, as Redis orders them).
func sortVersions(vs []VersionShown) {
	slices.SortStableFunc(vs, func(a, b VersionShown) int {
		if c := b.PublishedAt.Compare(a.PublishedAt); c != 0 {
			return c
		}
		return strings.Compare(b.Version, a.Version)
	})
}
