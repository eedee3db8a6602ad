package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"plaita/config"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/store/keys"
)

// Wake-up records (docs/wakeups.md). When a run ends suspended, the dispatcher registers what
// will wake the execution up again, for the roles that consume it:
//
//	delay / timeouts  → the delay role: a member of the ZSET <PLAITA_DELAY_QUEUE>:scheduled
//	wait_event        → the filter role: a subscription record + a per-event-type index
//	approval          → the console: an approval record + the tenant's pending-approval index
//
// Every write is idempotent: the member JSON and the record are a pure function of the
// suspended state, so a redelivered suspended result registers the same things again.

// The key builders below belong in store/keys (Space methods); they live here until they move.

// DelayScheduledKey is the delay role's ZSET of due wake-ups: <PLAITA_DELAY_QUEUE>:scheduled.
func DelayScheduledKey(cfg *config.Config) string {
	return config.DelayQueue.In(cfg) + ":scheduled"
}

// DelayEntry is a member of the delay ZSET.
type DelayEntry struct {
	ExecutionID string            `json:"execution_id"`
	TenantID    string            `json:"tenant_id"`
	FlowID      string            `json:"flow_id"`
	FlowVersion string            `json:"flow_version"`
	ResumeType  engine.ResumeType `json:"resume_type"` // continue (delay) | timeout (event, approval)
	Node        string            `json:"node"`
	Due         string            `json:"due"` // RFC 3339 (nanoseconds), UTC
}

// Subscription is the record of an execution waiting for an event.
type Subscription struct {
	ExecutionID string `json:"execution_id"`
	TenantID    string `json:"tenant_id"`
	FlowID      string `json:"flow_id"`
	FlowVersion string `json:"flow_version"`
	Node        string `json:"node"`
	EventType   string `json:"event_type"`
	Match       string `json:"match,omitempty"`
	Since       string `json:"since"`
	ExpiresAt   string `json:"expires_at,omitempty"` // "" = waits without a timeout
}

// Approval is the record of an execution waiting for a human answer.
type Approval struct {
	ExecutionID string `json:"execution_id"`
	TenantID    string `json:"tenant_id"`
	FlowID      string `json:"flow_id"`
	FlowVersion string `json:"flow_version"`
	Node        string `json:"node"`
	Message     string `json:"message,omitempty"`
	Since       string `json:"since"`
	Due         string `json:"due,omitempty"` // "" = no timeout
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// eventTTL is PLAITA_EVENT_TTL_SECONDS (7 days when unreadable).
func eventTTL(cfg *config.Config) (ttl time.Duration) {
	ttl = 7 * 24 * time.Hour
	defer func() { _ = recover() }() // a role without the variable keeps the default
	if cfg != nil {
		if s := config.EventTTLSeconds.In(cfg); s > 0 {
			ttl = time.Duration(s) * time.Second
		}
	}
	return ttl
}

// RegisterWakeup writes the wake-up records of a suspended execution. root is the key root.
func RegisterWakeup(ctx context.Context, c rueidis.Client, cfg *config.Config, root string, st *state.Execution) error {
	if st == nil || st.Status != state.Suspended || st.Suspend == nil {
		return errors.New("register wake-up: the execution is not suspended")
	}
	sp, err := keys.For(root, st.TenantID)
	if err != nil {
		return err
	}
	s := st.Suspend
	tenant := sp.Tenant()
	var cmds rueidis.Commands
	delay := func(rt engine.ResumeType, due time.Time) error {
		b, err := json.Marshal(DelayEntry{ExecutionID: st.ExecutionID, TenantID: tenant, FlowID: st.FlowID,
			FlowVersion: st.FlowVersion, ResumeType: rt, Node: s.Node, Due: stamp(due)})
		if err != nil {
			return err
		}
		cmds = append(cmds, c.B().Zadd().Key(DelayScheduledKey(cfg)).ScoreMember().
			ScoreMember(float64(due.UnixMilli()), string(b)).Build())
		return nil
	}
	// A record lives the event TTL, and at least that long past its due time.
	recordTTL := func(due *time.Time) time.Duration {
		ttl := eventTTL(cfg)
		if due != nil {
			if d := time.Until(*due) + ttl; d > ttl {
				ttl = d
			}
		}
		return ttl
	}
	switch s.Kind {
	case state.SuspendDelay:
		if s.Due == nil {
			return fmt.Errorf("register wake-up of %s: delay without a due time", st.ExecutionID)
		}
		if err := delay(engine.ResumeContinue, *s.Due); err != nil {
			return err
		}
	case state.SuspendEvent:
		sub := Subscription{ExecutionID: st.ExecutionID, TenantID: tenant, FlowID: st.FlowID, FlowVersion: st.FlowVersion,
			Node: s.Node, EventType: s.EventType, Match: s.Match, Since: stamp(s.Since)}
		score := "+inf"
		if s.Due != nil {
			sub.ExpiresAt = stamp(*s.Due)
			score = strconv.FormatInt(s.Due.UnixMilli(), 10)
		}
		b, err := json.Marshal(sub)
		if err != nil {
			return err
		}
		ttl := recordTTL(s.Due)
		idx, err := sp.SubscriptionIndex(s.EventType)
		if err != nil {
			return fmt.Errorf("register wake-up of %s: %w", st.ExecutionID, err)
		}
		subKey, err := sp.Subscription(st.ExecutionID)
		if err != nil {
			return fmt.Errorf("register wake-up of %s: %w", st.ExecutionID, err)
		}
		cmds = append(cmds,
			c.B().Set().Key(subKey).Value(string(b)).Ex(ttl).Build(),
			c.B().Arbitrary("ZADD").Keys(idx).Args(score, st.ExecutionID).Build(),
			c.B().Expire().Key(idx).Seconds(int64(ttl/time.Second)).Build())
		if s.Due != nil {
			if err := delay(engine.ResumeTimeout, *s.Due); err != nil {
				return err
			}
		}
	case state.SuspendApproval:
		ap := Approval{ExecutionID: st.ExecutionID, TenantID: tenant, FlowID: st.FlowID, FlowVersion: st.FlowVersion,
			Node: s.Node, Message: s.Message, Since: stamp(s.Since)}
		if s.Due != nil {
			ap.Due = stamp(*s.Due)
		}
		b, err := json.Marshal(ap)
		if err != nil {
			return err
		}
		apKey, err := sp.Approval(st.ExecutionID)
		if err != nil {
			return fmt.Errorf("register wake-up of %s: %w", st.ExecutionID, err)
		}
		cmds = append(cmds,
			c.B().Set().Key(apKey).Value(string(b)).Ex(recordTTL(s.Due)).Build(),
			c.B().Zadd().Key(sp.ApprovalIndex()).ScoreMember().ScoreMember(float64(s.Since.UnixMilli()), st.ExecutionID).Build())
		if s.Due != nil {
			if err := delay(engine.ResumeTimeout, *s.Due); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("register wake-up of %s: unknown suspension kind %q", st.ExecutionID, s.Kind)
	}
	for _, r := range c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("register %s wake-up of %s: %w", s.Kind, st.ExecutionID, err)
		}
	}
	return nil
}
