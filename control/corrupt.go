package control

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/store"
)

// An execution whose stored state no longer decodes stays in an operator's reach: Show gives
// what is stored (a CorruptView), Cancel replaces it with a cancelled state, Delete removes it.
// Resuming it is refused: no worker could run it.

// corruptRawShown bounds how much of the stored bytes a view carries.
const corruptRawShown = 64 << 10

// CorruptView is what Show gives of a state that cannot be read.
type CorruptView struct {
	ExecutionID  string   `json:"execution_id"`
	TenantID     string   `json:"tenant_id"`
	Corrupt      bool     `json:"corrupt"`
	Error        string   `json:"error"`
	Salvaged     Salvaged `json:"salvaged"`
	RawBytes     int      `json:"raw_bytes"`
	RawSHA256    string   `json:"raw_sha256,omitempty"`
	Raw          string   `json:"raw"`
	RawTruncated bool     `json:"raw_truncated"`
	RawShown     int      `json:"-"` // the bound of Raw
	Commands     []string `json:"commands"`
}

// Salvaged are the top-level fields that could still be read from a state that cannot be decoded.
type Salvaged struct {
	ExecutionID string       `json:"execution_id,omitempty"`
	TenantID    string       `json:"tenant_id,omitempty"`
	FlowID      string       `json:"flow_id,omitempty"`
	FlowVersion string       `json:"flow_version,omitempty"`
	Status      state.Status `json:"status,omitempty"`
	CurrentNode string       `json:"current_node,omitempty"`
	StartTime   time.Time    `json:"start_time,omitzero"`
}

func (p *Plane) newCorruptView(ce *store.CorruptStateError, tenant string) CorruptView {
	v := CorruptView{ExecutionID: ce.ID, TenantID: tenant, Corrupt: true, Error: ce.Err.Error(),
		Salvaged: Salvaged(store.Salvage(ce.Raw)), RawBytes: len(ce.Raw), Raw: string(ce.Raw), RawShown: corruptRawShown}
	if ce.Raw != nil {
		sum := sha256.Sum256(ce.Raw)
		v.RawSHA256 = hex.EncodeToString(sum[:])
		v.Commands = append(v.Commands, p.ExecutionCommandLine("cancel", ce.ID, tenant))
	}
	if len(v.Raw) > corruptRawShown {
		v.Raw, v.RawTruncated = v.Raw[:corruptRawShown], true
	}
	v.Commands = append(v.Commands, p.ExecutionCommandLine("delete", ce.ID, tenant))
	return v
}

// cancelCorrupt ends an execution whose state cannot be read: a cancelled state that keeps what
// could be salvaged replaces the stored bytes (unless they changed meanwhile).
func (p *Plane) cancelCorrupt(ctx context.Context, ts *store.TenantStore, ce *store.CorruptStateError) (Done, error) {
	tenant := ts.Tenant()
	if ce.Raw == nil {
		return Done{}, refuse(Conflict, "state_corrupt", ce, "%v; the key holds no state to replace: `%s` removes it",
			ce, p.ExecutionCommandLine("delete", ce.ID, tenant))
	}
	now := p.now().UTC()
	sv := store.Salvage(ce.Raw)
	sum := sha256.Sum256(ce.Raw)
	why := fmt.Sprintf("the stored state could not be read (%v); cancelled by an operator, its %d bytes (sha256 %s) replaced",
		ce.Err, len(ce.Raw), hex.EncodeToString(sum[:]))
	st := &state.Execution{ExecutionID: ce.ID, TenantID: tenant, FlowID: sv.FlowID, FlowVersion: sv.FlowVersion,
		Engine: engine.Version, Status: state.Cancelled, CurrentNode: sv.CurrentNode, Context: map[string]any{},
		NodeTimings: map[string]*state.NodeTiming{}, StartTime: cmp.Or(sv.StartTime, now), LastUpdate: now, EndTime: &now,
		Error:    &state.ErrorInfo{Type: engine.ErrTypeStateCorrupt, Node: sv.CurrentNode, Message: why, Permanent: true},
		Timeline: []state.TimelineEntry{{Seq: 1, Time: state.Stamp(now), Node: sv.CurrentNode, Event: "cancelled", Detail: "stored state unreadable"}}}
	err := ts.ReplaceCorrupt(ctx, ce.Raw, st)
	switch {
	case errors.Is(err, store.ErrCorruptChanged):
		return Done{}, refuse(Conflict, "state_changed", err, "execution %s: %v; look again with `%s`", ce.ID, err, p.ExecutionCommandLine("show", ce.ID, tenant))
	case err != nil:
		return Done{}, fmt.Errorf("execution %s: %w", ce.ID, err)
	}
	return Done{ExecutionID: ce.ID, TenantID: tenant, Action: "cancel", Was: wasCorrupt, Result: "cancelled", ReplacedBytes: len(ce.Raw)}, nil
}
