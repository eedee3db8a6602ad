package store

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"plaita/engine/state"
	"plaita/internal/tracing"
	"plaita/store/keys"
)

// Events (docs/events.md): what `plaita event publish`, the console and the worker publish, and
// what the filter role turns into resume tasks. Per tenant (<prefix> as for execution states):
//
//	<prefix>event:<id>                 STRING JSON record (Event), TTL = PLAITA_EVENT_TTL_SECONDS
//	<prefix>event_index:<type>         ZSET   event id → publish time (Unix ms); key TTL = event TTL
//	<prefix>event_index:<type>:prune   STRING throttle of the write-side prune (60 s)
//	<prefix>events                     ZSET   "<type> <id>" → publish time (Unix ms); key TTL = event TTL
//	<prefix>event_wake:<execution id>:<suspension>:<event id>   one-shot wake-up marker
//
// Per key root (platform):
//
//	<root>:event_bus:tenants           ZSET   tenant → last publish (Unix ms)
//	<root>:event_bus:cursor            HASH   tenant → the reconciler's cursor (Unix ms)
//	<root>:event_bus:notify            pub/sub channel: {"tenant_id","type","id"} per publish
//
// Every key sits in its own Cluster slot: a publish is two round trips of single-key commands
// (the record first, so a notified filter always finds it), never one script. The scripts of
// the Redis driver (events_redis.go: markers, cursor, tenant list) each touch one key.
//
// Events keeps the rules (events_bus.go, events_feed.go, events_wake.go, events_notify.go);
// what it stores goes through an EventsDriver (events_driver.go): RedisEvents lays these keys
// out, store/sqlite's EventStore keeps the same things in tables of the console's database for
// local mode.

// DefaultEventTTL is the lifetime of an event record when EventSettings.TTL is unset.
const DefaultEventTTL = 7 * 24 * time.Hour

// MaxEventDataBytes bounds an event's data (compact JSON): an event is a notification, and
// every execution it wakes keeps it in its state.
const MaxEventDataBytes = 1 << 20

// Write-side prune (off with PLAITA_DISABLE_EVENT_INDEX_PRUNE_ON_WRITE): at most every
// pruneEvery per (tenant, type), a publish checks the pruneBatch oldest members of the type's
// index and removes those whose record has expired.
const (
	pruneEvery = 60 * time.Second
	pruneBatch = 8
)

// wakeMarginTTL is how much longer a wake-up marker lives than an event: a marker must outlive
// the record whose re-scans it de-duplicates.
const wakeMarginTTL = 24 * time.Hour

var (
	// ErrEventNotFound: no such event (never published, or expired). Permanent (it matches
	// ErrNotFound).
	ErrEventNotFound = ErrNotFound.Kind("", "event not found")
	// ErrEventConflict: the event id is already published with another type or other data;
	// nothing was written. Permanent (it matches ErrInvalid).
	ErrEventConflict = ErrInvalid.Kind("", "event id already published with another type or data")
	// ErrBadEvent: bytes that are not an event record, or an event that cannot be published
	// (bad type, id, tenant, data). Permanent (it matches ErrInvalid).
	ErrBadEvent = ErrInvalid.Kind("", "malformed event")
)

// Event is one published event, as stored. TenantID is the tenant slug ("default" for the
// default tenant); PublishedAt is in UTC.
type Event struct {
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	TenantID    string          `json:"tenant_id"`
	Data        json.RawMessage `json:"data"`
	PublishedAt time.Time       `json:"published_at"`
	// TraceParent and TraceState are the trace context of the publisher's span, when it traced
	// (internal/tracing): the resume the event sends links it.
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
}

// Trace is the trace context of the span that published the event.
func (ev Event) Trace() tracing.Parent {
	return tracing.Parent{TraceParent: ev.TraceParent, TraceState: ev.TraceState}
}

// NewEventID mints an event id: "evt_" and 24 random hex digits.
func NewEventID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "evt_" + hex.EncodeToString(b[:])
}

// DecodeEvent reads a stored record strictly: a JSON object with a valid id, type and tenant,
// data, and an RFC 3339 published_at. Unknown fields are ignored (a newer publisher may add
// some). Anything else is ErrBadEvent naming what is wrong.
func DecodeEvent(b []byte) (Event, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || raw == nil {
		return Event{}, fmt.Errorf("%w: not a JSON object", ErrBadEvent)
	}
	str := func(name string) (string, error) {
		v, ok := raw[name]
		if !ok {
			return "", fmt.Errorf("%w: no %q", ErrBadEvent, name)
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", fmt.Errorf("%w: %q is not a string", ErrBadEvent, name)
		}
		return s, nil
	}
	var ev Event
	var err error
	if ev.ID, err = str("id"); err != nil {
		return Event{}, err
	}
	if ev.Type, err = str("type"); err != nil {
		return Event{}, err
	}
	if ev.TenantID, err = str("tenant_id"); err != nil {
		return Event{}, err
	}
	at, err := str("published_at")
	if err != nil {
		return Event{}, err
	}
	if ev.PublishedAt, err = time.Parse(time.RFC3339Nano, at); err != nil {
		return Event{}, fmt.Errorf("%w: published_at %q is not an RFC 3339 time", ErrBadEvent, at)
	}
	// In UTC the year must stay a four-digit one (0000-01-01T00:00:00+01:00 is in year -1,
	// which no record can be written back with).
	if ev.PublishedAt = ev.PublishedAt.UTC(); ev.PublishedAt.IsZero() || ev.PublishedAt.Year() < 1 || ev.PublishedAt.Year() > 9999 {
		return Event{}, fmt.Errorf("%w: published_at %q is out of range", ErrBadEvent, at)
	}
	data, ok := raw["data"]
	if !ok {
		return Event{}, fmt.Errorf("%w: no \"data\"", ErrBadEvent)
	}
	// Best effort: a trace context that is not a string is dropped, the event stays good.
	if tp, err := str("traceparent"); err == nil {
		ts, _ := str("tracestate")
		ev.TraceParent, ev.TraceState = tp, ts
	}
	if ev.Data, err = compactJSON(data); err != nil {
		return Event{}, fmt.Errorf("%w: data: %w", ErrBadEvent, err)
	}
	if err := ev.validate(); err != nil {
		return Event{}, err
	}
	return ev, nil
}

// validate checks the fields that become keys and the data bound.
func (ev *Event) validate() error {
	if _, err := keys.MustFor("", "").Event(ev.ID); err != nil {
		return fmt.Errorf("%w: %w", ErrBadEvent, err)
	}
	if err := keys.ValidName("event type", ev.Type); err != nil {
		return fmt.Errorf("%w: %w", ErrBadEvent, err)
	}
	if err := keys.ValidTenant(ev.TenantID); err != nil {
		return fmt.Errorf("%w: %w", ErrBadEvent, err)
	}
	if ev.TenantID == "" {
		ev.TenantID = keys.DefaultTenant
	}
	if len(ev.Data) > MaxEventDataBytes {
		return fmt.Errorf("%w: data is %d bytes, above the %d-byte bound", ErrBadEvent, len(ev.Data), MaxEventDataBytes)
	}
	if ev.Data != nil {
		// What a waiting execution reads as EVENT: nested no deeper than its state can hold,
		// numbers as it will read them.
		if err := state.CheckDocument(ev.Data); err != nil {
			return fmt.Errorf("%w: data: %w", ErrBadEvent, err)
		}
	}
	return nil
}

// EncodeEvent writes the stored form of an event: compact JSON, fields in the order of Event,
// no HTML escaping (the data is kept as published).
func EncodeEvent(ev Event) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ev); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadEvent, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func compactJSON(b []byte) (json.RawMessage, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	return buf.Bytes(), nil
}

// sameEvent reports whether a stored event is the one being published again: same type and
// the same data (as JSON values: key order and spacing do not matter).
func sameEvent(stored, ev Event) bool {
	if stored.Type != ev.Type {
		return false
	}
	if bytes.Equal(stored.Data, ev.Data) {
		return true
	}
	var a, b any
	return json.Unmarshal(stored.Data, &a) == nil && json.Unmarshal(ev.Data, &b) == nil && reflect.DeepEqual(a, b)
}

// EventRef names one event: what a notification carries and a feed member holds. At is the
// feed score (publish time, ms precision) when it comes from the feed.
type EventRef struct {
	TenantID string    `json:"tenant_id"`
	Type     string    `json:"type"`
	ID       string    `json:"id"`
	At       time.Time `json:"-"`
}

// DecodeNotification reads a notification payload (ErrBadEvent when it is not one).
func DecodeNotification(payload string) (EventRef, error) {
	var ref EventRef
	if err := json.Unmarshal([]byte(payload), &ref); err != nil {
		return EventRef{}, fmt.Errorf("%w: notification %q is not a JSON object of tenant_id, type and id", ErrBadEvent, payload)
	}
	ev := Event{ID: ref.ID, Type: ref.Type, TenantID: ref.TenantID}
	if err := ev.validate(); err != nil {
		return EventRef{}, fmt.Errorf("notification %q: %w", payload, err)
	}
	ref.TenantID = ev.TenantID
	return ref, nil
}

func feedMember(eventType, id string) string { return eventType + " " + id }

func parseFeedMember(m string) (eventType, id string, ok bool) {
	eventType, id, ok = strings.Cut(m, " ")
	return eventType, id, ok && eventType != "" && id != ""
}

// feedRef reads a feed member of sp's feed: false for a member no event can have (not
// "<type> <id>", a type or an id outside their alphabets; nothing this package writes).
func feedRef(sp keys.Space, m string) (EventRef, bool) {
	t, id, ok := parseFeedMember(m)
	if !ok || keys.ValidName("event type", t) != nil {
		return EventRef{}, false
	}
	if _, err := sp.Event(id); err != nil {
		return EventRef{}, false
	}
	return EventRef{TenantID: sp.Tenant(), Type: t, ID: id}, true
}
