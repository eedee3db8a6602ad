package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
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
}

// Mine reports whether the caller owns the wake-up and must enqueue it.
func (w Wake) Mine() bool { return w.State == WakeClaimed || w.State == WakeTakenOver }

// claimScript: KEYS[1] = the marker. ARGV = the pending value, now (ms), grace (ms), TTL (ms).
// Values: "pending <ms> <owner>", "sent <ms> <stream id>" or "refused <ms> <why>". One key.
var claimScript = rueidis.NewLuaScript(`
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[4])
  return {'claimed', ''}
end
if string.sub(v, 1, 5) == 'sent ' then
  return {'sent', v}
end
if string.sub(v, 1, 8) == 'refused ' then
  return {'refused', v}
end
local t = tonumber(string.match(v, '^pending (%d+)'))
if t == nil or tonumber(ARGV[2]) - t >= tonumber(ARGV[3]) then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[4])
  return {'taken_over', v}
end
return {'pending', v}
`)

// casScript: KEYS[1] = the marker. ARGV = the expected value, the new value ("" deletes), TTL
// (ms). One key.
var casScript = rueidis.NewLuaScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
end
return 1
`)

func (e *Events) wakeTTL() time.Duration { return e.s.TTL + wakeMarginTTL }

// ClaimWake claims the one-shot marker of delivering event eventID to the suspension (a token
// such as its start in Unix ns) of an execution of tenant. owner names the claimer (an
// instance id). A marker pending for grace or longer is taken over. The marker lives the
// event TTL plus a day, so every re-scan of a live event finds it.
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
	token := "pending " + strconv.FormatInt(now, 10) + " " + owner
	ctx, cancel := opCtx(ctx)
	defer cancel()
	arr, err := claimScript.Exec(ctx, e.c, []string{key}, []string{token, strconv.FormatInt(now, 10),
		strconv.FormatInt(grace.Milliseconds(), 10), strconv.FormatInt(e.wakeTTL().Milliseconds(), 10)}).AsStrSlice()
	if err != nil || len(arr) != 2 {
		return Wake{}, transient(ErrRedis, "claim "+key, fmt.Errorf("reply %v: %w", arr, err))
	}
	w := Wake{State: WakeState(arr[0]), Key: key, Previous: arr[1]}
	if w.Mine() {
		w.Token = token
	}
	return w, nil
}

// WakeSent marks a claimed wake-up as enqueued as stream entry streamID. It reports false when
// the marker no longer holds the caller's claim (another owner took it over after the grace
// period, and enqueues too).
func (e *Events) WakeSent(ctx context.Context, w Wake, streamID string) (bool, error) {
	return e.casWake(ctx, w, "sent "+strconv.FormatInt(e.Now().UnixMilli(), 10)+" "+streamID)
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
	return e.casWake(ctx, w, "refused "+strconv.FormatInt(e.Now().UnixMilli(), 10)+" "+why)
}

// ReleaseWake deletes a claimed marker whose wake-up could not be enqueued, so the next
// delivery of the event claims it again at once.
func (e *Events) ReleaseWake(ctx context.Context, w Wake) (bool, error) { return e.casWake(ctx, w, "") }

func (e *Events) casWake(ctx context.Context, w Wake, value string) (bool, error) {
	if !w.Mine() {
		return false, fmt.Errorf("%w: wake-up %s is not claimed by the caller (%s)", ErrInvalid, w.Key, w.State)
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	n, err := casScript.Exec(ctx, e.c, []string{w.Key}, []string{w.Token, value, strconv.FormatInt(e.wakeTTL().Milliseconds(), 10)}).AsInt64()
	if err != nil {
		return false, transient(ErrRedis, "write "+w.Key, err)
	}
	return n == 1, nil
}
