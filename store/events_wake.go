package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The one-shot wake-up markers: one claim per (execution, suspension, event), so an event wakes
// a wait once across filters and redeliveries (events.go has the key).

// WakeState is what ClaimWake found.
type WakeState string

const (
	// WakeClaimed: no marker existed; the caller owns it and enqueues the wake-up.
	WakeClaimed WakeState = "claimed"
	// WakeTakenOver: the marker was pending for longer than the grace period (its owner
	// died between claiming and enqueuing, or before it marked the wake-up sent); the caller
	// owns it now and enqueues.
	WakeTakenOver WakeState = "taken_over"
	// WakeSent: the wake-up was enqueued already.
	WakeSent WakeState = "sent"
	// WakePending: another owner claimed it within the grace period and is enqueuing.
	WakePending WakeState = "pending"
	// WakeRefused: the wake-up can never be enqueued (the queue refused its resume: event data
	// over the input bound, not an acceptable document); it is final, as a sent one is.
	WakeRefused WakeState = "refused"
)

// Wake is a claim of one wake-up marker.
type Wake struct {
	State WakeState
	Key   string
	// Token is the pending value this caller wrote (WakeClaimed, WakeTakenOver): WakeSent and
	// ReleaseWake change the marker only while it still holds it.
	Token string
	// Previous is the value found (WakeTakenOver, WakeSent, WakePending, WakeRefused).
	Previous string

	marker WakeMarker
}

// Mine reports whether the caller owns the wake-up and must enqueue it.
func (w Wake) Mine() bool { return w.State == WakeClaimed || w.State == WakeTakenOver }

// Marker values: "pending <ms> <owner>", "sent <ms> <stream id>" or "refused <ms> <why>".
const (
	wakePending = "pending "
	wakeSent    = "sent "
	wakeRefused = "refused "
)

// DecideWake is what a claim finds in a marker holding value (found false: none) at now (Unix
// ms): the state, and whether the caller's pending value replaces the marker's (WakeClaimed,
// WakeTakenOver). A sent or refused marker is final; a pending one is taken over once it is
// grace old, or when its time does not read. The Redis driver's claim script spells this in
// Lua; a driver that claims in a transaction calls it there.
func DecideWake(value string, found bool, now int64, grace time.Duration) (WakeState, bool) {
	switch {
	case !found:
		return WakeClaimed, true
	case strings.HasPrefix(value, wakeSent):
		return WakeSent, false
	case strings.HasPrefix(value, wakeRefused):
		return WakeRefused, false
	}
	// As Lua's tonumber(string.match(v, '^pending (%d+)')): the digits as a float.
	digits, _ := strings.CutPrefix(value, wakePending)
	n := 0
	for n < len(digits) && digits[n] >= '0' && digits[n] <= '9' {
		n++
	}
	t, _ := strconv.ParseFloat(digits[:n], 64) // only a range error: ±Inf, as Lua reads it too
	if !strings.HasPrefix(value, wakePending) || n == 0 || float64(now)-t >= float64(grace.Milliseconds()) {
		return WakeTakenOver, true
	}
	return WakePending, false
}

func (e *Events) wakeTTL() time.Duration { return e.s.TTL + wakeMarginTTL }

// ClaimWake claims the one-shot marker of delivering event eventID to the suspension (a token
// such as its start in Unix ns) of an execution of tenant. owner names the claimer (an
// instance id). A marker pending for grace or longer is taken over (DecideWake). The marker
// lives the event TTL plus a day, so every re-scan of a live event finds it. One round trip.
func (e *Events) ClaimWake(ctx context.Context, tenant, executionID, suspension, eventID, owner string, grace time.Duration) (Wake, error) {
	sp, err := e.space(tenant)
	if err != nil {
		return Wake{}, err
	}
	key, err := sp.EventWake(executionID, suspension, eventID)
	if err != nil {
		return Wake{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	now := e.Now().UnixMilli()
	token := wakePending + strconv.FormatInt(now, 10) + " " + owner
	ctx, cancel := opCtx(ctx)
	defer cancel()
	m := WakeMarker{Space: sp, ExecutionID: executionID, Suspension: suspension, EventID: eventID}
	state, prev, err := e.d.ClaimWake(ctx, m, WakeClaim{Token: token, Now: now, Grace: grace, TTL: e.wakeTTL()})
	if err != nil {
		return Wake{}, err
	}
	w := Wake{State: state, Key: key, Previous: prev, marker: m}
	if w.Mine() {
		w.Token = token
	}
	return w, nil
}

// WakeSent marks a claimed wake-up as enqueued as stream entry streamID. It reports false when
// the marker no longer holds the caller's claim (another owner took it over after the grace
// period, and enqueues too).
func (e *Events) WakeSent(ctx context.Context, w Wake, streamID string) (bool, error) {
	return e.casWake(ctx, w, wakeSent+strconv.FormatInt(e.Now().UnixMilli(), 10)+" "+streamID)
}

// maxRefusalText bounds the reason a refused marker keeps.
const maxRefusalText = 256

// WakeRefused marks a claimed wake-up as one that can never be enqueued, with why (cut to a few
// hundred bytes): every later claim of it finds WakeRefused, so no filter enqueues it or tries
// again. It reports false when the marker no longer holds the caller's claim.
func (e *Events) WakeRefused(ctx context.Context, w Wake, why string) (bool, error) {
	if len(why) > maxRefusalText {
		why = strings.ToValidUTF8(why[:maxRefusalText], "")
	}
	return e.casWake(ctx, w, wakeRefused+strconv.FormatInt(e.Now().UnixMilli(), 10)+" "+why)
}

// ReleaseWake deletes a claimed marker whose wake-up could not be enqueued, so the next
// delivery of the event claims it again at once.
func (e *Events) ReleaseWake(ctx context.Context, w Wake) (bool, error) { return e.casWake(ctx, w, "") }

// casWake changes the marker while it holds the caller's claim: one round trip.
func (e *Events) casWake(ctx context.Context, w Wake, value string) (bool, error) {
	if !w.Mine() || w.marker == (WakeMarker{}) {
		return false, fmt.Errorf("%w: wake-up %s is not claimed by the caller (%s)", ErrInvalid, w.Key, w.State)
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return e.d.SetWake(ctx, w.marker, w.Token, value, e.wakeTTL())
}
