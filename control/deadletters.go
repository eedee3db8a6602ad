package control

import (
	"context"
	"errors"

	"plaita/queue"
)

// Dead letters (the DLQ stream beside the task queue): list them, show one, replay one exactly
// once (queue.Queue.Replay). The stream is shared by every tenant; an operation for one tenant
// sees only its entries, and an entry of another tenant reads as not found.

// DeadLetters lists up to limit of the newest dead letters of tenant (every tenant's when all).
// Entries of other tenants do not count towards limit: up to 10 × limit entries are read.
func (p *Plane) DeadLetters(ctx context.Context, tenant string, all bool, limit int) ([]queue.DLQEntry, error) {
	if limit < 1 || limit > 1000 {
		return nil, refuse(Invalid, "invalid_limit", nil, "--limit %d: use 1 to 1000", limit)
	}
	tenant, err := p.Tenant(tenant)
	if err != nil {
		return nil, err
	}
	read := limit
	if !all {
		read = 10 * limit
	}
	es, err := p.d.Queue.ListDLQ(ctx, read)
	if err != nil {
		return nil, err
	}
	out := []queue.DLQEntry{}
	for _, e := range es {
		if len(out) == limit {
			break
		}
		if all || sameTenant(e.TenantID, tenant) {
			out = append(out, e)
		}
	}
	return out, nil
}

// DeadLetter reads one dead letter of tenant (any tenant's when all).
func (p *Plane) DeadLetter(ctx context.Context, tenant string, all bool, id string) (queue.DLQEntry, error) {
	tenant, err := p.Tenant(tenant)
	if err != nil {
		return queue.DLQEntry{}, err
	}
	e, err := p.d.Queue.DeadLetterByID(ctx, id)
	if errors.Is(err, queue.ErrDLQEntryNotFound) || err == nil && !all && !sameTenant(e.TenantID, tenant) {
		return queue.DLQEntry{}, refuse(NotFound, "dead_letter_not_found", queue.ErrDLQEntryNotFound, "no dead letter %s in tenant %s", id, tenant)
	}
	return e, err
}

// ReplayDeadLetter enqueues a dead letter again, once: a second replay answers
// "already_replayed" and enqueues nothing.
func (p *Plane) ReplayDeadLetter(ctx context.Context, tenant string, all bool, id string) (queue.ReplayResult, error) {
	if _, err := p.DeadLetter(ctx, tenant, all, id); err != nil {
		return queue.ReplayResult{}, err
	}
	res, err := p.d.Queue.Replay(ctx, id)
	if errors.Is(err, queue.ErrReplayRefused) {
		return res, refuse(Conflict, "replay_refused", err, "%v", err)
	}
	return res, err
}

func sameTenant(entry, tenant string) bool {
	return entry == tenant || entry == "" && tenant == "default"
}
