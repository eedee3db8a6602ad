package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"plaita/store/keys"
)

// Flow publication (what `plaita start FLOW.json` and the console write), as the Redis driver
// (flows_redis.go) keeps it — the console's database keeps the same in its own tables
// (store/sqlite/flowstore.go):
//
//	<prefix>flow:<flow_id>:<version>   STRING  the definition, byte for byte as published
//	<prefix>flow_versions:<flow_id>    ZSET    member <version>, score = publication time (unix ms)
//	<prefix>flow_list                  ZSET    member <flow_id>, score = its last publication (unix ms)
//
// A published (flow id, version) is immutable: executions suspended on it resume against that
// definition. "Latest" is the member of flow_versions with the highest score (ties, which need
// the same millisecond, go to the greater version string, as ZREVRANGE orders them).

var (
	// ErrFlowNotFound: no such flow or version is published. Permanent (it matches
	// ErrNotFound): reading it again finds nothing until someone publishes it.
	ErrFlowNotFound = ErrNotFound.Kind("", "flow not published")
	// ErrVersionConflict: the version is published with a different definition; nothing was
	// written. Permanent (it matches ErrInvalid).
	ErrVersionConflict = ErrInvalid.Kind("", "flow version already published with a different definition")
	// ErrReservedFlowKey: a key of the publication is one of the reserved keys (the task
	// queue's streams: PLAITA_QUEUE_NAME=plaita:flow:jobs puts its dead letters at
	// plaita:flow:jobs:dlq, the key of flow jobs version dlq); nothing was written. Permanent
	// (it matches ErrInvalid).
	ErrReservedFlowKey = ErrInvalid.Kind("", "flow key is reserved")
)

// PublishResult says what Publish did.
type PublishResult string

const (
	Published        PublishResult = "published"
	AlreadyPublished PublishResult = "already_published"
)

// Flows reads and publishes flow definitions of every tenant under one key root, over a
// driver (FlowsDriver: Redis for the cluster, the console's database in local mode) that only
// stores: every rule below is written once, here.
type Flows struct {
	d        FlowsDriver
	root     string
	reserved []string
}

// NewFlows returns the flow store over driver d under root ("" = keys.DefaultRoot).
func NewFlows(d FlowsDriver, root string) *Flows {
	if root == "" {
		root = keys.DefaultRoot
	}
	return &Flows{d: d, root: root}
}

// Root is the key root the flows' keys are under: Reserve's names are keys of it.
func (f *Flows) Root() string { return f.root }

// Reserve names keys no publication may write: every publisher passes the task queue's stream
// and dead-letter stream (configured names that may fall among the flow keys).
func (f *Flows) Reserve(streams ...string) *Flows {
	f.reserved = append(f.reserved, streams...)
	return f
}

func (f *Flows) space(tenant string) (keys.Space, error) { return keys.For(f.root, tenant) }

// checkReserved refuses a publication that would write one of the reserved keys. The keys are
// Redis's: a publication refused on Redis is refused on every driver, so a flow published in
// local mode can be published on the cluster.
func (f *Flows) checkReserved(sp keys.Space, flowID, version string) error {
	for _, k := range []string{sp.Flow(flowID, version), sp.FlowVersions(flowID), sp.FlowList()} {
		if slices.Contains(f.reserved, k) {
			return fmt.Errorf("%w: flow %s version %q would be written at %s, a key of the task queue (PLAITA_QUEUE_NAME, PLAITA_DLQ_KEY): use another flow id or version",
				ErrReservedFlowKey, flowID, version, k)
		}
	}
	return nil
}

// Get reads a published definition: ErrFlowNotFound when it is not published, a transient
// error (ErrRedis on Redis) when the driver does not answer.
func (f *Flows) Get(ctx context.Context, tenant, flowID, version string) ([]byte, error) {
	sp, err := f.space(tenant)
	if err != nil {
		return nil, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	b, found, err := f.d.Definition(ctx, sp, flowID, version)
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, fmt.Errorf("%w: flow %s version %q in tenant %s", ErrFlowNotFound, flowID, version, sp.Tenant())
	}
	return b, nil
}

// Latest is the most recently published version of a flow (ErrFlowNotFound: none).
func (f *Flows) Latest(ctx context.Context, tenant, flowID string) (string, error) {
	sp, err := f.space(tenant)
	if err != nil {
		return "", err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	v, found, err := f.d.Latest(ctx, sp, flowID)
	switch {
	case err != nil:
		return "", err
	case !found:
		return "", fmt.Errorf("%w: flow %s in tenant %s has no published version", ErrFlowNotFound, flowID, sp.Tenant())
	}
	return v, nil
}

// publishAttempts bounds the Put / Definition race with a concurrent delete of the definition.
const publishAttempts = 3

// Publish publishes def under (flowID, version) unless that version exists. same tells whether
// a stored definition is this one (the caller compares flow hashes; the store knows no flow
// model). A version already holding the same definition is left as it is — existing registry
// entries keep their times, so republishing an old version does not make it the latest — and
// missing registry entries are added (a publication interrupted between its writes); a
// different definition is ErrVersionConflict and nothing is written.
func (f *Flows) Publish(ctx context.Context, tenant, flowID, version string, def []byte, at time.Time,
	same func(stored []byte) (bool, error)) (PublishResult, error) {
	sp, err := f.space(tenant)
	if err != nil {
		return "", err
	}
	if err := keys.ValidName("flow version", version); err != nil {
		return "", err
	}
	if err := f.checkReserved(sp, flowID, version); err != nil {
		return "", err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	for range publishAttempts {
		created, err := f.d.Put(ctx, sp, flowID, version, def)
		switch {
		case err != nil:
			return "", err
		case created:
			return Published, f.d.Register(ctx, sp, flowID, version, at, false)
		}
		stored, found, err := f.d.Definition(ctx, sp, flowID, version)
		switch {
		case err != nil:
			return "", err
		case !found:
			continue // deleted in between: try to publish again
		}
		ok, err := same(stored)
		if err != nil {
			return "", fmt.Errorf("the definition published as %s cannot be read: %w", sp.Flow(flowID, version), err)
		}
		if !ok {
			return "", fmt.Errorf("%w: flow %s version %q", ErrVersionConflict, flowID, version)
		}
		return AlreadyPublished, f.d.Register(ctx, sp, flowID, version, at, true)
	}
	return "", fmt.Errorf("%s was deleted %d times while publishing it", sp.Flow(flowID, version), publishAttempts)
}

// FlowRestore is one published version to write back when the runtime lost it (the console's
// engine sync, control/engine_sync.go, from its record of every version it published).
type FlowRestore struct {
	Tenant, FlowID, Version string
	Definition              []byte
	PublishedAt             time.Time
}

// RestoreOutcome is what Restore did with one version: Written (the runtime lacked the
// definition and has it now) or not (it had one: it is left as it is, not compared — the
// console records a version only after the runtime took it), or Err.
type RestoreOutcome struct {
	Written bool
	Err     error
}

// Restore writes back the versions the runtime lacks, in one round trip (FlowsDriver.Restore:
// the definition unless one is stored, the version with its publication time unless the flow
// has it, the flow in the list unless a newer publication keeps its place). An item whose keys
// are invalid or reserved is refused without being sent. A driver that does not answer fails
// every item sent (transient).
func (f *Flows) Restore(ctx context.Context, items []FlowRestore) []RestoreOutcome {
	out := make([]RestoreOutcome, len(items))
	writes := make([]FlowWrite, 0, len(items))
	sent := make([]int, 0, len(items))
	for i, it := range items {
		sp, err := f.space(it.Tenant)
		if err == nil {
			err = keys.ValidName("flow version", it.Version)
		}
		if err == nil {
			err = keys.ValidName("flow id", it.FlowID)
		}
		if err == nil {
			err = f.checkReserved(sp, it.FlowID, it.Version)
		}
		if err != nil {
			out[i].Err = err
			continue
		}
		writes = append(writes, FlowWrite{Space: sp, FlowID: it.FlowID, Version: it.Version, Definition: it.Definition, PublishedAt: it.PublishedAt})
		sent = append(sent, i)
	}
	if len(writes) == 0 {
		return out
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	for k, o := range f.d.Restore(ctx, writes) {
		out[sent[k]] = o
	}
	return out
}
