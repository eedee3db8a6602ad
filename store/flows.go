package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/rueidis"

	"plaita/store/keys"
)

// Flow publication (what `plaita start FLOW.json` and the console write):
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

// Flows reads and publishes flow definitions of every tenant under one key root.
type Flows struct {
	c        rueidis.Client
	root     string
	reserved []string
}

// NewFlows returns the flow store over c under root ("" = keys.DefaultRoot).
func NewFlows(c rueidis.Client, root string) *Flows {
	if root == "" {
		root = keys.DefaultRoot
	}
	return &Flows{c: c, root: root}
}

// Reserve names keys no publication may write: every publisher passes the task queue's stream
// and dead-letter stream (configured names that may fall among the flow keys).
func (f *Flows) Reserve(streams ...string) *Flows {
	f.reserved = append(f.reserved, streams...)
	return f
}

func (f *Flows) space(tenant string) (keys.Space, error) { return keys.For(f.root, tenant) }

// checkReserved refuses a publication that would write one of the reserved keys.
func (f *Flows) checkReserved(sp keys.Space, flowID, version string) error {
	for _, k := range []string{sp.Flow(flowID, version), sp.FlowVersions(flowID), sp.FlowList()} {
		if slices.Contains(f.reserved, k) {
			return fmt.Errorf("%w: flow %s version %q would be written at %s, a key of the task queue (PLAITA_QUEUE_NAME, PLAITA_DLQ_KEY): use another flow id or version",
				ErrReservedFlowKey, flowID, version, k)
		}
	}
	return nil
}

// Get reads a published definition: ErrFlowNotFound when it is not published, ErrRedis
// (transient) when Redis does not answer.
func (f *Flows) Get(ctx context.Context, tenant, flowID, version string) ([]byte, error) {
	sp, err := f.space(tenant)
	if err != nil {
		return nil, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	key := sp.Flow(flowID, version)
	b, err := f.c.Do(ctx, f.c.B().Get().Key(key).Build()).AsBytes()
	switch {
	case rueidis.IsRedisNil(err):
		return nil, fmt.Errorf("%w: flow %s version %q in tenant %s", ErrFlowNotFound, flowID, version, sp.Tenant())
	case err != nil:
		return nil, transient(ErrRedis, "read flow "+flowID, err)
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
	vs, err := f.c.Do(ctx, f.c.B().Zrevrange().Key(sp.FlowVersions(flowID)).Start(0).Stop(0).Build()).AsStrSlice()
	if err != nil {
		return "", transient(ErrRedis, "read versions of flow "+flowID, err)
	}
	if len(vs) == 0 {
		return "", fmt.Errorf("%w: flow %s in tenant %s has no published version", ErrFlowNotFound, flowID, sp.Tenant())
	}
	return vs[0], nil
}

// publishAttempts bounds the SET NX / GET race with a concurrent delete of the key.
const publishAttempts = 3

// Publish publishes def under (flowID, version) unless that version exists. same tells whether
// a stored definition is this one (the caller compares flow hashes; the store knows no flow
// model). A version already holding the same definition is left as it is — existing registry
// entries keep their scores, so republishing an old version does not make it the latest — and
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
	c, key := f.c, sp.Flow(flowID, version)
	for range publishAttempts {
		err := c.Do(ctx, c.B().Set().Key(key).Value(rueidis.BinaryString(def)).Nx().Build()).Error()
		switch {
		case err == nil:
			return Published, f.register(ctx, sp, flowID, version, at, false)
		case !rueidis.IsRedisNil(err):
			return "", transient(ErrRedis, "publish flow "+flowID, err)
		}
		stored, err := c.Do(ctx, c.B().Get().Key(key).Build()).AsBytes()
		switch {
		case rueidis.IsRedisNil(err):
			continue // deleted in between: try to publish again
		case err != nil:
			return "", transient(ErrRedis, "read flow "+flowID, err)
		}
		ok, err := same(stored)
		if err != nil {
			return "", fmt.Errorf("the definition published as %s cannot be read: %w", key, err)
		}
		if !ok {
			return "", fmt.Errorf("%w: flow %s version %q", ErrVersionConflict, flowID, version)
		}
		return AlreadyPublished, f.register(ctx, sp, flowID, version, at, true)
	}
	return "", fmt.Errorf("%s was deleted %d times while publishing it", key, publishAttempts)
}

// register records the version in flow_versions and the flow in flow_list; onlyMissing keeps
// existing entries' scores.
func (f *Flows) register(ctx context.Context, sp keys.Space, flowID, version string, at time.Time, onlyMissing bool) error {
	c, score := f.c, float64(at.UnixMilli())
	var cmds rueidis.Commands
	if onlyMissing {
		cmds = rueidis.Commands{
			c.B().Zadd().Key(sp.FlowVersions(flowID)).Nx().ScoreMember().ScoreMember(score, version).Build(),
			c.B().Zadd().Key(sp.FlowList()).Nx().ScoreMember().ScoreMember(score, flowID).Build(),
		}
	} else {
		cmds = rueidis.Commands{
			c.B().Zadd().Key(sp.FlowVersions(flowID)).ScoreMember().ScoreMember(score, version).Build(),
			c.B().Zadd().Key(sp.FlowList()).ScoreMember().ScoreMember(score, flowID).Build(),
		}
	}
	for _, r := range c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return transient(ErrRedis, fmt.Sprintf("record flow %s version %s", flowID, version), err)
		}
	}
	return nil
}

// FlowRestore is one published version to write back to Redis when Redis lost it (the
// console's engine sync, control/engine_sync.go, from its record of every version it
// published).
type FlowRestore struct {
	Tenant, FlowID, Version string
	Definition              []byte
	PublishedAt             time.Time
}

// RestoreOutcome is what Restore did with one version: Written (Redis lacked the definition
// and has it now) or not (Redis had one: it is left as it is, not compared — the console
// records a version only after Redis took it), or Err.
type RestoreOutcome struct {
	Written bool
	Err     error
}

// Restore writes back the versions Redis lacks, in one pipeline: for each, SET NX of the
// definition and the registry entries a publication writes (ZADD NX in flow_versions with the
// publication time, ZADD GT in flow_list, so a flow's newer publication keeps its place).
// An item whose keys are invalid or reserved is refused without being sent. A Redis that does
// not answer fails every item sent (ErrRedis, transient).
func (f *Flows) Restore(ctx context.Context, items []FlowRestore) []RestoreOutcome {
	out := make([]RestoreOutcome, len(items))
	c := f.c
	cmds := make(rueidis.Commands, 0, 3*len(items))
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
		score := float64(it.PublishedAt.UnixMilli())
		cmds = append(cmds, c.B().Set().Key(sp.Flow(it.FlowID, it.Version)).Value(rueidis.BinaryString(it.Definition)).Nx().Build(),
			c.B().Zadd().Key(sp.FlowVersions(it.FlowID)).Nx().ScoreMember().ScoreMember(score, it.Version).Build(),
			c.B().Zadd().Key(sp.FlowList()).Gt().ScoreMember().ScoreMember(score, it.FlowID).Build())
		sent = append(sent, i)
	}
	if len(cmds) == 0 {
		return out
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	res := c.DoMulti(ctx, cmds...)
	for k, i := range sent {
		set, vers, list := res[3*k], res[3*k+1], res[3*k+2]
		switch err := set.Error(); {
		case err == nil:
			out[i].Written = true
		case !rueidis.IsRedisNil(err):
			out[i].Err = transient(ErrRedis, "restore flow "+items[i].FlowID, err)
			continue
		}
		for _, r := range []rueidis.RedisResult{vers, list} {
			if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
				out[i].Err = transient(ErrRedis, "register flow "+items[i].FlowID, err)
			}
		}
	}
	return out
}
