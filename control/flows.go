package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/store"
	"plaita/store/keys"
)

// Flow publication (what `plaita start FLOW.json` and the console write; store/flows.go has the
// keys). The version is the definition's "version" field, else the one asked for, else the
// first 12 hex characters of its engine.FlowHash (so an unchanged definition republishes the
// same version). A published version is immutable: executions suspended on it resume against
// that very definition (their flow_hash), so overwriting it would strand them all; a change is
// published as a new version.

// flowHashVersionLen is how much of the hash names a version derived from it.
const flowHashVersionLen = 12

// ParseFlow validates a definition with the worker's node types: it parses here exactly when it
// parses on a worker. An invalid definition is an Invalid refusal "invalid_flow" whose Err is
// the *engine.ValidationError (every problem with its JSON path). A valid one may carry
// warnings (Flow.Warnings, each with its JSON path: a wait_event whose match has no correlation
// term, docs/flows.md): they never refuse it.
func (p *Plane) ParseFlow(def []byte) (*engine.Flow, error) {
	return parseFlow(p.nodeTypes, p.d.Expr, def)
}

// parseFlow parses def with the node types nodeTypes sets up: an Invalid refusal
// "invalid_flow" when it does not parse.
func parseFlow(nodeTypes func() (*engine.Registry, error), lim engine.ExprLimits, def []byte) (*engine.Flow, error) {
	reg := engine.NewRegistry()
	if nodeTypes != nil {
		var err error
		if reg, err = nodeTypes(); err != nil {
			return nil, fmt.Errorf("set up the node types: %w", err)
		}
	}
	f, err := engine.Parse(def, reg, lim)
	if err != nil {
		return nil, &Refusal{Class: Invalid, Code: "invalid_flow", Message: err.Error(), Err: err}
	}
	return f, nil
}

// Published is what PublishFlow did.
type Published struct {
	Flow    *engine.Flow
	Version string
	Result  store.PublishResult // published | already_published
	// Warnings are the definition's validation warnings (Flow.Warnings), for the front end to
	// show beside the result.
	Warnings []engine.Problem
}

// PublishFlow validates def and publishes it in tenant under its version (see above; version
// is the one asked for, "" for none). The same definition already published under that version
// is left as it is; another one is a Conflict refusal "flow_version_conflict" and nothing is
// written.
func (p *Plane) PublishFlow(ctx context.Context, tenant string, def []byte, version string) (Published, error) {
	tenant, f, version, hash, err := preparePublication(p, tenant, def, version)
	if err != nil {
		return Published{}, err
	}
	var storedHash string
	res, err := p.d.Flows.Publish(ctx, tenant, f.ID, version, def, p.now(), func(stored []byte) (bool, error) {
		storedHash, err = engine.FlowHash(stored)
		return storedHash == hash, err
	})
	switch {
	case errors.Is(err, store.ErrVersionConflict):
		ref := refuse(Conflict, "flow_version_conflict", err, "flow %s version %q is already published with a different definition (hash %s, this one %s); "+
			"a published version is immutable (executions of it resume against that definition)", f.ID, version, shortHash(storedHash), shortHash(hash))
		ref.Unblock = `to publish the change, give it a new version: pass another --version (or set "version" in the definition)`
		if f.Version != "" {
			ref.Unblock = `to publish the change, give it a new version: change "version" in the definition (or remove it and pass --version V)`
		}
		return Published{}, ref
	case errors.Is(err, store.ErrReservedFlowKey):
		return Published{}, refuse(Invalid, "reserved_flow_key", err, "%v", err)
	case err != nil:
		return Published{}, fmt.Errorf("publish flow %s version %s: %w", f.ID, version, err)
	}
	return Published{Flow: f, Version: version, Result: res, Warnings: f.Warnings}, nil
}

// preparePublication checks what a publication needs before anything is written, in both
// modes: the tenant, the definition (parsed by ops), its version and its hash.
func preparePublication(ops interface {
	Tenant(string) (string, error)
	ParseFlow([]byte) (*engine.Flow, error)
}, tenant string, def []byte, version string) (string, *engine.Flow, string, string, error) {
	tenant, err := ops.Tenant(tenant)
	if err != nil {
		return "", nil, "", "", err
	}
	f, err := ops.ParseFlow(def)
	if err != nil {
		return "", nil, "", "", err
	}
	if version, err = publishVersion(f, def, version); err != nil {
		return "", nil, "", "", &Refusal{Class: Invalid, Code: "invalid_version", Message: err.Error(), Err: err}
	}
	hash, err := engine.FlowHash(def)
	if err != nil {
		return "", nil, "", "", err
	}
	return tenant, f, version, hash, nil
}

// publishVersion is the version a definition is published as: its "version" field, else flag,
// else the first 12 hex characters of its hash.
func publishVersion(f *engine.Flow, def []byte, flag string) (string, error) {
	switch {
	case f.Version != "" && flag != "" && f.Version != flag:
		return "", fmt.Errorf("the definition says version %q but the version asked for is %q", f.Version, flag)
	case f.Version != "":
		return f.Version, nil
	case flag != "":
		// The version becomes a key segment: the definition's own was checked by engine.Parse.
		if err := keys.ValidName("version", flag); err != nil {
			return "", err
		}
		return flag, nil
	}
	h, err := engine.FlowHash(def)
	if err != nil {
		return "", err
	}
	return h[:flowHashVersionLen], nil
}

func shortHash(h string) string { return h[:min(len(h), flowHashVersionLen)] }

// PublishedFlow reads and parses a published flow: version "" is the latest. NotFound when it is
// not published; an Invalid refusal "invalid_flow" when the stored definition does not parse.
func (p *Plane) PublishedFlow(ctx context.Context, tenant, flowID, version string) (*engine.Flow, string, error) {
	tenant, err := p.Tenant(tenant)
	if err != nil {
		return nil, "", err
	}
	if version == "" {
		if version, err = p.d.Flows.Latest(ctx, tenant, flowID); err != nil {
			if errors.Is(err, store.ErrFlowNotFound) {
				return nil, "", refuse(NotFound, "flow_not_found", err, "%v; publish it with %s (or start the file)", err, p.Command("flow", "publish", "FLOW.json"))
			}
			return nil, "", err
		}
	}
	def, err := p.d.Flows.Get(ctx, tenant, flowID, version)
	switch {
	case errors.Is(err, store.ErrFlowNotFound):
		return nil, "", refuse(NotFound, "flow_not_found", err, "flow %s version %q is not published in tenant %s", flowID, version, tenant)
	case err != nil:
		return nil, "", fmt.Errorf("read flow %s: %w", flowID, err)
	}
	f, err := p.ParseFlow(def)
	if err != nil {
		if r := AsRefusal(err); r != nil {
			r.Message = fmt.Sprintf("published flow %s version %s: %s", flowID, version, r.Message)
		}
		return nil, "", err
	}
	return f, version, nil
}

// executionFlow reads and parses the definition st runs, as the worker does for a resume: an
// error matching ErrFlowUnavailable or ErrCannotCheck when the advice can only offer a cancel.
func (p *Plane) executionFlow(ctx context.Context, tenant string, st *state.Execution) (*engine.Flow, error) {
	def, err := p.d.Flows.Get(ctx, tenant, st.FlowID, st.FlowVersion)
	switch {
	case errors.Is(err, store.ErrFlowNotFound):
		return nil, fmt.Errorf("%w: %v: the worker would dead-letter a resume (flow_not_found)", ErrFlowUnavailable, err)
	case err != nil:
		return nil, fmt.Errorf("read flow %s version %q: %w", st.FlowID, st.FlowVersion, err)
	}
	reg, err := p.nodeTypes()
	if err != nil {
		return nil, fmt.Errorf("%w: the node types cannot be set up in this process (%w); --force enqueues without the check", ErrCannotCheck, err)
	}
	f, err := engine.Parse(def, reg, p.d.Expr)
	if err != nil {
		return nil, fmt.Errorf("%w: the published flow %s version %q does not parse in this process (a worker that cannot parse it either dead-letters "+
			"the resume as invalid_flow; --force enqueues without the check): %w", ErrCannotCheck, st.FlowID, st.FlowVersion, err)
	}
	return f, nil
}

// Advice is what the hints and the resume check of st are judged against: its published
// definition (f when the caller has it already), and for an execution in error the retry gates.
func (p *Plane) Advice(ctx context.Context, tenant string, st *state.Execution, f *engine.Flow) (*Advice, error) {
	return p.advice(ctx, tenant, st, f, p.executionFlow)
}

// flowReader reads the definition an execution runs: Plane.executionFlow, or a bulk forecast's
// cache of it (bulk_forecast.go), which reads each flow version once for a whole selection.
type flowReader func(ctx context.Context, tenant string, st *state.Execution) (*engine.Flow, error)

// advice is Advice with st's definition (when f is nil) read by read.
func (p *Plane) advice(ctx context.Context, tenant string, st *state.Execution, f *engine.Flow, read flowReader) (*Advice, error) {
	ts, err := p.tenantStore(tenant)
	if err != nil {
		return nil, err
	}
	a := &Advice{Flow: f, Limits: p.d.Expr, Now: p.now()}
	if a.Flow == nil && st.Status != state.Completed && st.Status != state.Cancelled {
		if a.Flow, err = read(ctx, ts.Tenant(), st); err != nil {
			if !errors.Is(err, ErrFlowUnavailable) && !errors.Is(err, ErrCannotCheck) {
				return nil, err
			}
			a.FlowErr = err
		}
	}
	if st.Status == state.Error {
		b := &Budget{}
		sp := keys.MustFor(p.d.Root, ts.Tenant())
		if b.G1Key, err = sp.Mechanism(keys.FamG1Wakeups, st.ExecutionID); err != nil {
			return nil, err
		}
		if b.NoFailKey, err = sp.Mechanism(keys.FamNoFail, st.ExecutionID); err != nil {
			return nil, err
		}
		if b.RetryBudget, err = ts.RetryBudget(ctx, st.ExecutionID); err != nil {
			return nil, fmt.Errorf("read the retry gates: %w", err)
		}
		a.Budget = b
	}
	return a, nil
}

// Flows lists the tenant's published flows, most recently published first.
func (p *Plane) Flows(ctx context.Context, tenant string, limit int) ([]store.FlowSummary, error) {
	page, err := p.FlowPage(ctx, tenant, "", limit)
	return page.Items, err
}

// FlowPage is a page of the tenant's published flows after cursor ("" for the first),
// most recently published first.
func (p *Plane) FlowPage(ctx context.Context, tenant, cursor string, limit int) (store.FlowPage, error) {
	if err := checkLimit(limit, MaxFlowList); err != nil {
		return store.FlowPage{}, err
	}
	tenant, err := p.Tenant(tenant)
	if err != nil {
		return store.FlowPage{}, err
	}
	page, err := p.d.Flows.Page(ctx, tenant, cursor, limit)
	if errors.Is(err, store.ErrInvalid) {
		return page, refuse(Invalid, "invalid_cursor", err, "cursor: %v", err)
	}
	return page, err
}

// FlowShown is one published version of a flow with the flow's versions.
type FlowShown struct {
	FlowID     string          `json:"flow_id"`
	TenantID   string          `json:"tenant_id"`
	Version    string          `json:"version"`
	Hash       string          `json:"flow_hash"`
	Name       string          `json:"name,omitempty"`
	Nodes      int             `json:"nodes"`
	Definition json.RawMessage `json:"definition"`
	// Versions are the flow's versions, newest first: as Redis has them, and in the console
	// with its record of each (Catalog.Flow).
	Versions []VersionShown `json:"versions"`
}

// Flow reads a published flow (version "" = the latest) and its versions.
func (p *Plane) Flow(ctx context.Context, tenant, flowID, version string) (FlowShown, error) {
	if err := keys.ValidName("flow id", flowID); err != nil {
		return FlowShown{}, refuse(Invalid, "invalid_flow_id", err, "%v", err)
	}
	tenant, err := p.Tenant(tenant)
	if err != nil {
		return FlowShown{}, err
	}
	versions, err := p.d.Flows.Versions(ctx, tenant, flowID)
	if errors.Is(err, store.ErrFlowNotFound) {
		return FlowShown{}, refuse(NotFound, "flow_not_found", err, "no flow %s is published in tenant %s", flowID, tenant)
	} else if err != nil {
		return FlowShown{}, err
	}
	if version == "" {
		version = versions[0].Version
	}
	def, err := p.d.Flows.Get(ctx, tenant, flowID, version)
	if errors.Is(err, store.ErrFlowNotFound) {
		return FlowShown{}, refuse(NotFound, "flow_not_found", err, "flow %s version %q is not published in tenant %s", flowID, version, tenant)
	} else if err != nil {
		return FlowShown{}, err
	}
	out := FlowShown{FlowID: flowID, TenantID: tenant, Version: version, Definition: def, Versions: make([]VersionShown, 0, len(versions))}
	for _, v := range versions {
		out.Versions = append(out.Versions, VersionShown{FlowVersion: v, Engine: true})
	}
	if out.Hash, err = engine.FlowHash(def); err != nil {
		return FlowShown{}, fmt.Errorf("flow %s version %s: %w", flowID, version, err)
	}
	if f, err := p.ParseFlow(def); err == nil {
		out.Name, out.Nodes = f.Name, len(f.Nodes)
	}
	return out, nil
}
