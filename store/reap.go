package store

import (
	"context"
	"fmt"

	"plaita/engine/state"
	"plaita/store/keys"
)

// Reaping a zombie execution — a running state no worker holds and nothing will resume — is a
// write over a state the reaper read, against a worker that may still be alive: it must lose to
// any write between its read and its own. So the reaper reads the exact bytes (Snapshot), and
// ReplaceUnleased writes only when the key still holds those bytes and no lease exists, in one
// script; the fence generation moves on, so a worker that takes a lease later from an older
// read is fenced out.

// ErrStateChanged: the state key no longer holds the bytes the caller read (a worker wrote a
// step, or another operator acted); nothing was written. Permanent for that read.
var ErrStateChanged = ErrInvalid.Kind("", "the stored state changed since it was read")

// Snapshot is a state with the exact bytes it was read from.
type Snapshot struct {
	State *state.Execution
	Raw   []byte
	// Leased reports whether the execution's lease key existed when the state was read.
	Leased bool
}

// Snapshot reads a state's bytes and whether its lease exists, in one round trip (one slot: the
// keys share the execution's hash tag). Missing: ErrNotFound; undecodable: *CorruptStateError.
func (ts *TenantStore) Snapshot(ctx context.Context, id string) (Snapshot, error) {
	if err := keys.ValidID(id); err != nil {
		return Snapshot{}, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	b, leased, err := ts.r.d.Snapshot(ctx, ts.sp, id)
	if err != nil {
		return Snapshot{}, err
	}
	st, err := decodeFor(id, b)
	if err != nil {
		return Snapshot{}, err
	}
	return Snapshot{State: st, Raw: b, Leased: leased}, nil
}

// ReplaceUnleased writes st in place of the bytes raw that Snapshot read, only while the key
// holds them and no lease exists: ErrStateChanged, or ErrLeaseHeld (a live worker runs it),
// otherwise; nothing written then.
func (ts *TenantStore) ReplaceUnleased(ctx context.Context, raw []byte, st *state.Execution) error {
	n, err := ts.replaceRead(ctx, raw, st, ReplaceUnleased)
	switch {
	case err != nil:
		return err
	case n == ReplacedChanged:
		return fmt.Errorf("%w: %s", ErrStateChanged, st.ExecutionID)
	case n == ReplacedLeased:
		return fmt.Errorf("%w: %s", ErrLeaseHeld, st.ExecutionID)
	}
	return nil
}

// replaceRead writes st in place of the bytes raw were read as (StateDriver.Replace).
func (ts *TenantStore) replaceRead(ctx context.Context, raw []byte, st *state.Execution, how ReplaceHow) (Replaced, error) {
	e, err := ts.encode(st)
	if err != nil {
		return ReplacedChanged, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return ts.r.d.Replace(ctx, ts.sp, raw, e.write(), how)
}
