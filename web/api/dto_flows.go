package api

import (
	"encoding/json"
	"time"

	"plaita/control"
)

// The wire types of the flow routes (h_ops.go, h_drafts.go): the console's own, copied field by
// field from control's results, so that a change of storage changes no answer of the API.

// FlowSummary is one published flow in a list.
type FlowSummary struct {
	FlowID      string    `json:"flow_id"`
	PublishedAt time.Time `json:"published_at" doc:"its last publication"`
	Latest      string    `json:"latest_version"`
	Versions    int64     `json:"versions"`
}

// FlowList is a page of the tenant's published flows, most recently published first; its cursor
// is the last flow's publication: a flow published again meanwhile moves to the front.
type FlowList struct {
	TenantID string `json:"tenant_id"`
	control.Page[FlowSummary]
}

// FlowView is one published version of a flow with the flow's versions.
type FlowView struct {
	FlowID     string          `json:"flow_id"`
	TenantID   string          `json:"tenant_id"`
	Version    string          `json:"version"`
	Hash       string          `json:"flow_hash"`
	Name       string          `json:"name,omitempty"`
	Nodes      int             `json:"nodes"`
	Definition json.RawMessage `json:"definition"`
	// Versions are the flow's versions, newest first: as Redis has them, and as the console
	// recorded them.
	Versions []FlowVersion `json:"versions"`
}

// FlowVersion is one version of a flow: as Redis has it (the workers run it) and as the console
// recorded it (who published it).
type FlowVersion struct {
	Version     string    `json:"version"`
	PublishedAt time.Time `json:"published_at"`
	PublishedBy string    `json:"published_by,omitempty"`
	Seq         int64     `json:"seq,omitempty" doc:"its place in the console's record (1 for the first version the console published)"`
	Hash        string    `json:"flow_hash,omitempty"`
	Engine      bool      `json:"engine"`
	Recorded    bool      `json:"recorded"`
}

func flowViewOf(f control.FlowShown) FlowView {
	v := FlowView{FlowID: f.FlowID, TenantID: f.TenantID, Version: f.Version, Hash: f.Hash, Name: f.Name, Nodes: f.Nodes,
		Definition: f.Definition}
	if f.Versions != nil {
		v.Versions = make([]FlowVersion, 0, len(f.Versions))
	}
	for _, fv := range f.Versions {
		v.Versions = append(v.Versions, FlowVersion{Version: fv.Version, PublishedAt: fv.PublishedAt, PublishedBy: fv.PublishedBy,
			Seq: fv.Seq, Hash: fv.Hash, Engine: fv.Engine, Recorded: fv.Recorded})
	}
	return v
}

// Draft is a flow's draft: the editor's working copy, and its revision (the ETag).
type Draft struct {
	Tenant     string          `json:"tenant"`
	FlowID     string          `json:"flow_id"`
	Definition json.RawMessage `json:"definition,omitempty" doc:"absent in a list"`
	Revision   int64           `json:"revision" doc:"the draft's saves (1 at creation): If-Match"`
	UpdatedBy  string          `json:"updated_by"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
}

func draftOf(d control.Draft) Draft {
	return Draft{Tenant: d.Tenant, FlowID: d.FlowID, Definition: d.Definition, Revision: d.Revision, UpdatedBy: d.UpdatedBy,
		CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt}
}
