package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"plaita/engine/state"
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
// (the record first, so a notified filter always finds it), never one script. The scripts
// below (markers, cursor, stale subscriptions) each touch one key.

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

// EventSettings are the event bus's knobs (roles build them from the configuration).
type EventSettings struct {
	// TTL is PLAITA_EVENT_TTL_SECONDS: the lifetime of a record, and of the index and feed
	// keys after their last write (< 1 s: DefaultEventTTL).
	TTL time.Duration
	// DisablePruneOnWrite is PLAITA_DISABLE_EVENT_INDEX_PRUNE_ON_WRITE.
	DisablePruneOnWrite bool
}

// Events is the event bus of one key root. It is safe for concurrent use.
type Events struct {
	c    rueidis.Client
	root string
	s    EventSettings
	// Now is the clock of publish times and marker ages (NewEvents sets time.Now; tests
	// replace it before first use).
	Now func() time.Time
}

// NewEvents returns the event bus over c under root ("" = keys.DefaultRoot).
func NewEvents(c rueidis.Client, s EventSettings, root string) *Events {
	if root == "" {
		root = keys.DefaultRoot
	}
	if s.TTL < time.Second {
		s.TTL = DefaultEventTTL
	}
	return &Events{c: c, root: root, s: s, Now: time.Now}
}

// TTL is the effective event lifetime.
func (e *Events) TTL() time.Duration { return e.s.TTL }

func (e *Events) space(tenant string) (keys.Space, error) { return keys.For(e.root, tenant) }

// platform is the space of the platform keys.
func (e *Events) platform() keys.Space { return keys.MustFor(e.root, "") }

// publishAttempts bounds the SET NX / GET race with the record expiring in between.
const eventPublishAttempts = 3

// PrepareEvent is an event as it is published: its id minted when it has none, its data ({}
// when empty) compacted, and everything checked against the rules of a published event
// (ErrBadEvent). Publish starts with it; a backend that keeps no event records (the console's
// local mode) checks events with it too, so both refuse the same ones.
func PrepareEvent(ev Event) (Event, error) {
	if ev.ID == "" {
		ev.ID = NewEventID()
	}
	if len(bytes.TrimSpace(ev.Data)) == 0 {
		ev.Data = json.RawMessage(`{}`)
	}
	var err error
	if ev.Data, err = compactJSON(ev.Data); err != nil {
		return Event{}, fmt.Errorf("%w: data: %w", ErrBadEvent, err)
	}
	if err := ev.validate(); err != nil {
		return Event{}, err
	}
	return ev, nil
}

// Publish stores an event, indexes it and notifies the filters. ev.ID "" mints one
// (NewEventID); ev.TenantID "" is the default tenant; empty data is {}; PublishedAt is set
// now. Publishing an id again with the same type and data is idempotent: the stored event is
// returned with duplicate = true, its index entries are written again (a publish interrupted
// half way is completed) and the filters are notified again (they deliver an event to an
// execution once, whatever the number of notifications). Another type or other data under the
// same id is ErrEventConflict and nothing is written. Bad input is ErrBadEvent; a Redis
// failure ErrRedis.
//
// Two round trips: the record (SET NX, so a notified filter finds it), then the index, the
// feed, the tenant list and the notification pipelined; the write-side prune adds two, at most
// once a minute per (tenant, type).
func (e *Events) Publish(ctx context.Context, ev Event) (stored Event, duplicate bool, err error) {
	if ev, err = PrepareEvent(ev); err != nil {
		return Event{}, false, err
	}
	sp, err := e.space(ev.TenantID)
	if err != nil {
		return Event{}, false, fmt.Errorf("%w: %w", ErrBadEvent, err)
	}
	key, _ := sp.Event(ev.ID)
	ev.PublishedAt = e.Now().UTC()
	rec, err := EncodeEvent(ev)
	if err != nil {
		return Event{}, false, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	c := e.c
	stored, duplicate = ev, false
	for attempt := 0; ; attempt++ {
		if attempt == eventPublishAttempts {
			return Event{}, false, fmt.Errorf("%w: publish event %s: its record expired %d times while it was read", ErrRedis, ev.ID, attempt)
		}
		err := c.Do(ctx, c.B().Set().Key(key).Value(string(rec)).Nx().Px(e.s.TTL).Build()).Error()
		if err == nil {
			break
		}
		if !rueidis.IsRedisNil(err) {
			return Event{}, false, transient(ErrRedis, "write event "+ev.ID, err)
		}
		b, err := c.Do(ctx, c.B().Get().Key(key).Build()).AsBytes()
		if rueidis.IsRedisNil(err) {
			continue // expired in between: publish it afresh
		}
		if err != nil {
			return Event{}, false, transient(ErrRedis, "read event "+ev.ID, err)
		}
		old, err := DecodeEvent(b)
		if err != nil {
			return Event{}, false, fmt.Errorf("%w: event %s: the stored record (%s) does not decode: %w", ErrEventConflict, ev.ID, key, err)
		}
		if !sameEvent(old, ev) {
			return Event{}, false, fmt.Errorf("%w: event %s in tenant %s is %s with data %s", ErrEventConflict, ev.ID, sp.Tenant(), old.Type, truncate(string(old.Data), 200))
		}
		stored, duplicate = old, true
		break
	}
	return stored, duplicate, e.index(ctx, sp, stored)
}

// index writes an event's index and feed members, the tenant's entry in the tenant list and
// the notification, and runs the write-side prune when it is due.
func (e *Events) index(ctx context.Context, sp keys.Space, ev Event) error {
	c, pl := e.c, e.platform()
	idx, _ := sp.EventIndex(ev.Type)
	score := float64(ev.PublishedAt.UnixMilli())
	note, _ := json.Marshal(EventRef{TenantID: sp.Tenant(), Type: ev.Type, ID: ev.ID})
	cmds := rueidis.Commands{
		c.B().Zadd().Key(idx).ScoreMember().ScoreMember(score, ev.ID).Build(),
		c.B().Pexpire().Key(idx).Milliseconds(e.s.TTL.Milliseconds()).Build(),
		c.B().Zadd().Key(sp.EventFeed()).ScoreMember().ScoreMember(score, feedMember(ev.Type, ev.ID)).Build(),
		c.B().Pexpire().Key(sp.EventFeed()).Milliseconds(e.s.TTL.Milliseconds()).Build(),
		c.B().Zadd().Key(pl.EventBusTenants()).ScoreMember().ScoreMember(float64(e.Now().UnixMilli()), sp.Tenant()).Build(),
		c.B().Publish().Channel(pl.EventBusNotify()).Message(string(note)).Build(),
	}
	prune := !e.s.DisablePruneOnWrite
	if prune {
		throttle, _ := sp.EventIndexPrune(ev.Type)
		cmds = append(cmds, c.B().Set().Key(throttle).Value("1").Nx().Px(pruneEvery).Build())
	}
	res := doMultiPublishing(ctx, c, cmds, 5)
	for _, r := range res[:6] {
		if err := r.Error(); err != nil {
			return transient(ErrRedis, "index event "+ev.ID, err)
		}
	}
	if !prune {
		return nil
	}
	if err := res[6].Error(); err != nil {
		// The prune is a fallback of the janitor: an event is published without it.
		return nil
	}
	_, _ = e.pruneIndex(ctx, sp, ev.Type)
	return nil
}

// doMultiPublishing sends cmds, of which cmds[pub] is a PUBLISH, in one round trip — except on
// a Cluster, where a PUBLISH has no slot and rueidis refuses it beside keyed commands: there it
// goes alone, after the others (a notification must not arrive before what it announces).
// The results are in the order of cmds.
func doMultiPublishing(ctx context.Context, c rueidis.Client, cmds rueidis.Commands, pub int) []rueidis.RedisResult {
	if c.Mode() != rueidis.ClientModeCluster {
		return c.DoMulti(ctx, cmds...)
	}
	rest := append(append(rueidis.Commands{}, cmds[:pub]...), cmds[pub+1:]...)
	res := c.DoMulti(ctx, rest...)
	out := append(append([]rueidis.RedisResult{}, res[:pub]...), c.Do(ctx, cmds[pub]))
	return append(out, res[pub:]...)
}

// pruneIndex checks the pruneBatch oldest members of a type's index and removes those whose
// record is gone (from the index and the feed). It returns how many it removed.
func (e *Events) pruneIndex(ctx context.Context, sp keys.Space, eventType string) (int, error) {
	c := e.c
	idx, err := sp.EventIndex(eventType)
	if err != nil {
		return 0, err
	}
	ids, err := c.Do(ctx, c.B().Zrange().Key(idx).Min("0").Max(strconv.Itoa(pruneBatch-1)).Build()).AsStrSlice()
	if err != nil {
		return 0, transient(ErrRedis, "read "+idx, err)
	}
	var refs []EventRef
	for _, id := range ids {
		refs = append(refs, EventRef{TenantID: sp.Tenant(), Type: eventType, ID: id})
	}
	return e.removeExpired(ctx, sp, refs)
}

// removeExpired removes, for each event whose record does not exist, its index and feed
// members. One round trip to check, one to remove. It returns how many events it removed.
func (e *Events) removeExpired(ctx context.Context, sp keys.Space, refs []EventRef) (int, error) {
	if len(refs) == 0 {
		return 0, nil
	}
	c := e.c
	checks := make(rueidis.Commands, 0, len(refs))
	var valid []EventRef
	var removes rueidis.Commands
	gone := 0
	for _, r := range refs {
		key, err := sp.Event(r.ID)
		if err != nil {
			// A member that can never have a record: it goes at once.
			removes = append(removes, e.removeCmds(sp, r)...)
			gone++
			continue
		}
		valid = append(valid, r)
		checks = append(checks, c.B().Exists().Key(key).Build())
	}
	if len(checks) > 0 {
		for i, res := range c.DoMulti(ctx, checks...) {
			n, err := res.AsInt64()
			if err != nil {
				return 0, transient(ErrRedis, "check events of "+sp.Tenant(), err)
			}
			if n == 0 {
				removes = append(removes, e.removeCmds(sp, valid[i])...)
				gone++
			}
		}
	}
	if len(removes) == 0 {
		return 0, nil
	}
	for _, res := range c.DoMulti(ctx, removes...) {
		if err := res.Error(); err != nil {
			return 0, transient(ErrRedis, "remove expired events of "+sp.Tenant(), err)
		}
	}
	return gone, nil
}

// removeCmds removes an event's feed member and, when its type can have one, its index member.
func (e *Events) removeCmds(sp keys.Space, r EventRef) rueidis.Commands {
	c := e.c
	cmds := rueidis.Commands{c.B().Zrem().Key(sp.EventFeed()).Member(feedMember(r.Type, r.ID)).Build()}
	if idx, err := sp.EventIndex(r.Type); err == nil {
		cmds = append(cmds, c.B().Zrem().Key(idx).Member(r.ID).Build())
	}
	return cmds
}

// Get reads one event of a tenant: ErrEventNotFound when it does not exist (or expired),
// ErrBadEvent when the stored bytes are not a record of this id and tenant, ErrRedis when Redis
// does not answer.
func (e *Events) Get(ctx context.Context, tenant, id string) (Event, error) {
	sp, err := e.space(tenant)
	if err != nil {
		return Event{}, err
	}
	key, err := sp.Event(id)
	if err != nil {
		return Event{}, fmt.Errorf("%w: %w", ErrBadEvent, err)
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	b, err := e.c.Do(ctx, e.c.B().Get().Key(key).Build()).AsBytes()
	switch {
	case rueidis.IsRedisNil(err):
		return Event{}, fmt.Errorf("%w: %s in tenant %s", ErrEventNotFound, id, sp.Tenant())
	case isWrongType(err):
		return Event{}, fmt.Errorf("%w: %s holds no string: %w", ErrBadEvent, key, err)
	case err != nil:
		return Event{}, transient(ErrRedis, "read event "+id, err)
	}
	return decodeEventAt(key, id, sp.Tenant(), b)
}

// GetMany reads several events of a tenant in one round trip (the filter's reconciler reads a
// page of the feed so): for each id, the event or the error Get would return for it
// (ErrEventNotFound, ErrBadEvent). A Redis failure fails the whole read (ErrRedis).
func (e *Events) GetMany(ctx context.Context, tenant string, ids []string) ([]Event, []error, error) {
	sp, err := e.space(tenant)
	if err != nil {
		return nil, nil, err
	}
	evs, errs := make([]Event, len(ids)), make([]error, len(ids))
	refs := make([]EventRef, 0, len(ids))
	pos := make([]int, 0, len(ids))
	for i, id := range ids {
		if _, err := sp.Event(id); err != nil {
			errs[i] = fmt.Errorf("%w: %w", ErrBadEvent, err)
			continue
		}
		refs = append(refs, EventRef{TenantID: sp.Tenant(), ID: id})
		pos = append(pos, i)
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	reads, err := e.getMany(ctx, sp, refs)
	if err != nil {
		return nil, nil, err
	}
	for j, r := range reads {
		i := pos[j]
		switch {
		case r.missing:
			errs[i] = fmt.Errorf("%w: %s in tenant %s", ErrEventNotFound, ids[i], sp.Tenant())
		case r.err != nil:
			errs[i] = r.err
		default:
			evs[i] = r.ev
		}
	}
	return evs, errs, nil
}

// decodeEventAt decodes the record under key and checks that it is the record of id in tenant.
func decodeEventAt(key, id, tenant string, b []byte) (Event, error) {
	ev, err := DecodeEvent(b)
	if err != nil {
		return Event{}, fmt.Errorf("%s: %w", key, err)
	}
	if ev.ID != id || ev.TenantID != tenant {
		return Event{}, fmt.Errorf("%w: %s holds event %s of tenant %s", ErrBadEvent, key, ev.ID, ev.TenantID)
	}
	return ev, nil
}

// EventPage is a List answer: the events, newest first, and how many listed members had no
// (valid) record — expired ones are removed from the index as they are found. Invalid counts
// the members no event can have (removed as they are found too). NextCursor is the cursor of
// the next page ("" on the last one).
type EventPage struct {
	Events     []Event `json:"events"`
	Expired    int     `json:"expired"`
	Corrupt    int     `json:"corrupt"`
	Invalid    int     `json:"invalid,omitempty"`
	NextCursor string  `json:"next_cursor,omitempty"`
}

// MaxEventList bounds one List.
const MaxEventList = 1000

// indexPage reads up to limit members of a ZSET index after cur, newest first (pageScript),
// and the cursor of the next page ("" when the index ended before limit).
func indexPage(ctx context.Context, c rueidis.Client, key string, cur cursor, limit int) (members []string, next string, err error) {
	rows, err := pageScript.Exec(ctx, c, []string{key},
		[]string{cur.Member, strconv.FormatFloat(cur.Score, 'g', -1, 64), strconv.Itoa(limit)}).ToArray()
	if err != nil {
		return nil, "", transient(ErrRedis, "read "+key, err)
	}
	members = make([]string, 0, len(rows)/2)
	for i := 0; i+1 < len(rows); i += 2 {
		m, _ := rows[i].ToString()
		score, err := rows[i+1].AsFloat64()
		if err != nil {
			return nil, "", fmt.Errorf("%w: read %s: score of %q: %w", ErrRedis, key, m, err)
		}
		members = append(members, m)
		cur = cursor{Score: score, Member: m}
	}
	if len(members) == limit {
		next = cur.encode()
	}
	return members, next, nil
}

// EventQuery asks for one page of a tenant's events, newest first.
type EventQuery struct {
	Tenant string
	Type   string // "" = every type
	// Cursor is "" for the newest events, else the NextCursor of the page before: the page
	// goes on after the last index member it read, even when that member was removed since.
	Cursor string
	Limit  int // 1 … MaxEventList index members read
}

// List reads a tenant's newest events, of one type (eventType) or of all types (""), at most
// limit (1 … MaxEventList): the first page of Page.
func (e *Events) List(ctx context.Context, tenant, eventType string, limit int) (EventPage, error) {
	return e.Page(ctx, EventQuery{Tenant: tenant, Type: eventType, Limit: limit})
}

// Page reads one page of a tenant's events: q.Limit index members after q.Cursor, newest
// first. Members whose record expired are removed on the way (the read-side lazy prune), and
// so are members no event can have (counted in Invalid); records that do not decode are
// counted and skipped, so a page may hold fewer events than its limit and still have a next
// one. A malformed cursor, type or limit is ErrInvalid; a Redis failure ErrRedis.
func (e *Events) Page(ctx context.Context, q EventQuery) (EventPage, error) {
	sp, err := e.space(q.Tenant)
	if err != nil {
		return EventPage{}, err
	}
	eventType, limit := q.Type, q.Limit
	if limit < 1 || limit > MaxEventList {
		return EventPage{}, fmt.Errorf("%w: list limit %d (1–%d)", ErrInvalid, limit, MaxEventList)
	}
	cur, err := decodeCursor(q.Cursor)
	if err != nil {
		return EventPage{}, err
	}
	key := sp.EventFeed()
	if eventType != "" {
		if key, err = sp.EventIndex(eventType); err != nil {
			return EventPage{}, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	c := e.c
	members, next, err := indexPage(ctx, c, key, cur, limit)
	if err != nil {
		return EventPage{}, err
	}
	page := EventPage{NextCursor: next}
	refs := make([]EventRef, 0, len(members))
	for _, m := range members {
		r, ok := EventRef{TenantID: sp.Tenant(), Type: eventType, ID: m}, true
		if eventType == "" {
			r, ok = feedRef(sp, m)
		} else if _, err := sp.Event(m); err != nil {
			ok = false
		}
		if !ok {
			page.Invalid++
			c.Do(ctx, c.B().Zrem().Key(key).Member(m).Build())
			continue
		}
		refs = append(refs, r)
	}
	var gone []EventRef
	evs, err := e.getMany(ctx, sp, refs)
	if err != nil {
		return EventPage{}, err
	}
	for i, got := range evs {
		switch {
		case got.missing:
			page.Expired++
			gone = append(gone, refs[i])
		case got.err != nil:
			page.Corrupt++
		default:
			page.Events = append(page.Events, got.ev)
		}
	}
	if len(gone) > 0 {
		_, _ = e.removeExpired(ctx, sp, gone)
	}
	if page.Events == nil {
		page.Events = []Event{}
	}
	return page, nil
}

type eventRead struct {
	ev      Event
	missing bool
	err     error
}

// getMany reads several records in one round trip (single-key GETs: they may live in
// different Cluster slots).
func (e *Events) getMany(ctx context.Context, sp keys.Space, refs []EventRef) ([]eventRead, error) {
	out := make([]eventRead, len(refs))
	cmds := make(rueidis.Commands, 0, len(refs))
	pos := make([]int, 0, len(refs))
	for i, r := range refs {
		key, err := sp.Event(r.ID)
		if err != nil {
			out[i].missing = true
			continue
		}
		cmds = append(cmds, e.c.B().Get().Key(key).Build())
		pos = append(pos, i)
	}
	if len(cmds) == 0 {
		return out, nil
	}
	for j, res := range e.c.DoMulti(ctx, cmds...) {
		i := pos[j]
		b, err := res.AsBytes()
		switch {
		case rueidis.IsRedisNil(err):
			out[i].missing = true
		case isWrongType(err):
			out[i].err = fmt.Errorf("%w: %w", ErrBadEvent, err)
		case err != nil:
			return nil, transient(ErrRedis, "read events of "+sp.Tenant(), err)
		default:
			key, _ := sp.Event(refs[i].ID)
			out[i].ev, out[i].err = decodeEventAt(key, refs[i].ID, sp.Tenant(), b)
		}
	}
	return out, nil
}

// ---- the feed, the tenant list and the reconciler's cursors --------------------------------

// TenantList is what Tenants read.
type TenantList struct {
	Tenants []string
	// Invalid counts the members that are no tenant slug: skipped and removed on the way.
	Invalid int
}

// Tenants lists the tenants that published an event at or after since (the tenant list's
// score is the last publish), in slug order. Members that are no tenant slug are removed.
func (e *Events) Tenants(ctx context.Context, since time.Time) (TenantList, error) {
	ctx, cancel := opCtx(ctx)
	defer cancel()
	key := e.platform().EventBusTenants()
	min := "-inf"
	if !since.IsZero() {
		min = strconv.FormatInt(since.UnixMilli(), 10)
	}
	ts, err := e.c.Do(ctx, e.c.B().Zrange().Key(key).Min(min).Max("+inf").Byscore().Build()).AsStrSlice()
	if err != nil {
		return TenantList{}, transient(ErrRedis, "read "+key, err)
	}
	var out TenantList
	var bad []string
	for _, t := range ts {
		if keys.ValidTenant(t) == nil {
			out.Tenants = append(out.Tenants, t)
		} else {
			bad = append(bad, t)
		}
	}
	if out.Invalid = len(bad); out.Invalid > 0 {
		e.c.Do(ctx, e.c.B().Zrem().Key(key).Member(bad...).Build()) // best effort: skipped again next time
	}
	return out, nil
}

// FeedRead is one page of a tenant's feed.
type FeedRead struct {
	Refs []EventRef // the usable members, oldest first
	// Read is how many members the page read, usable or not; Last is the score of the last one
	// and AtLast how many of the members read have that score: the caller pages on from there.
	Read   int
	Last   time.Time
	AtLast int
	// Invalid counts the members no event can have (not "<type> <id>", a type or an id outside
	// their alphabets): skipped and left for the janitor (SweepFeed removes them). Removing
	// them here would shift the ranks the caller pages by.
	Invalid int
}

// FeedPage is one page of a tenant's feed between two publish times (both inclusive, ms
// precision), oldest first: at most count members after the first skip ones.
func (e *Events) FeedPage(ctx context.Context, tenant string, from, to time.Time, skip, count int) (FeedRead, error) {
	sp, err := e.space(tenant)
	if err != nil {
		return FeedRead{}, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	c, key := e.c, sp.EventFeed()
	res, err := c.Do(ctx, c.B().Zrange().Key(key).Min(strconv.FormatInt(from.UnixMilli(), 10)).Max(strconv.FormatInt(to.UnixMilli(), 10)).
		Byscore().Limit(int64(skip), int64(count)).Withscores().Build()).AsZScores()
	if err != nil {
		return FeedRead{}, transient(ErrRedis, "read "+key, err)
	}
	out := FeedRead{Refs: make([]EventRef, 0, len(res)), Read: len(res)}
	for _, z := range res {
		at := time.UnixMilli(int64(z.Score)).UTC()
		if at.Equal(out.Last) {
			out.AtLast++
		} else {
			out.Last, out.AtLast = at, 1
		}
		r, ok := feedRef(sp, z.Member)
		if !ok {
			out.Invalid++
			continue
		}
		r.At = at
		out.Refs = append(out.Refs, r)
	}
	return out, nil
}

// Cursor reads the reconciler's cursor of a tenant; found is false when it has none (a first
// start, or a lost cursor).
func (e *Events) Cursor(ctx context.Context, tenant string) (at time.Time, found bool, err error) {
	sp, err := e.space(tenant)
	if err != nil {
		return time.Time{}, false, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	key := e.platform().EventBusCursor()
	s, found, err := optString(e.c.Do(ctx, e.c.B().Hget().Key(key).Field(sp.Tenant()).Build()))
	if err != nil {
		return time.Time{}, false, transient(ErrRedis, "read "+key, err)
	}
	if !found {
		return time.Time{}, false, nil
	}
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, false, nil // unreadable: as lost
	}
	return time.UnixMilli(ms).UTC(), true, nil
}

// cursorScript moves a tenant's cursor forward only: KEYS[1] = the cursor HASH, ARGV = tenant,
// Unix ms. One key.
var cursorScript = rueidis.NewLuaScript(`
local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]))
local at = tonumber(ARGV[2])
if cur == nil or cur < at then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  return 1
end
return 0
`)

// SetCursor moves a tenant's reconcile cursor to at, never backwards (several filters share
// it; the one that scanned further wins).
func (e *Events) SetCursor(ctx context.Context, tenant string, at time.Time) error {
	sp, err := e.space(tenant)
	if err != nil {
		return err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	key := e.platform().EventBusCursor()
	if err := cursorScript.Exec(ctx, e.c, []string{key}, []string{sp.Tenant(), strconv.FormatInt(at.UnixMilli(), 10)}).Error(); err != nil {
		return transient(ErrRedis, "write "+key, err)
	}
	return nil
}

// SweepResult is one janitor pass over one tenant's feed.
type SweepResult struct {
	Checked int // members looked at (the budget counts these)
	Removed int // expired events removed from the feed and their type's index
	Invalid int // of Removed, the members no event can have
	Next    int // the rank the next pass starts at (0: the feed was walked to its end)
}

// SweepFeed checks up to budget members of a tenant's feed from rank start (oldest first) and
// removes, from the feed and from their type's index, the events whose record has expired,
// and from the feed the members no event can have (FeedPage skips them). Next is where the
// following pass continues; it wraps to 0 at the end of the feed.
func (e *Events) SweepFeed(ctx context.Context, tenant string, start, budget int) (SweepResult, error) {
	sp, err := e.space(tenant)
	if err != nil {
		return SweepResult{}, err
	}
	if budget < 1 {
		budget = 1
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	c, key := e.c, sp.EventFeed()
	members, err := c.Do(ctx, c.B().Zrange().Key(key).Min(strconv.Itoa(start)).Max(strconv.Itoa(start+budget-1)).Build()).AsStrSlice()
	if err != nil {
		return SweepResult{}, transient(ErrRedis, "read "+key, err)
	}
	refs := make([]EventRef, 0, len(members))
	var bad []string
	for _, m := range members {
		r, ok := feedRef(sp, m)
		if !ok {
			bad = append(bad, m)
			continue
		}
		refs = append(refs, r)
	}
	if len(bad) > 0 {
		if err := c.Do(ctx, c.B().Zrem().Key(key).Member(bad...).Build()).Error(); err != nil {
			return SweepResult{}, transient(ErrRedis, "write "+key, err)
		}
	}
	n, err := e.removeExpired(ctx, sp, refs)
	if err != nil {
		return SweepResult{}, err
	}
	removed := len(bad) + n
	res := SweepResult{Checked: len(members), Removed: removed, Invalid: len(bad)}
	if len(members) == budget {
		// Removed members shift the ranks after them down.
		res.Next = start + budget - removed
	}
	return res, nil
}

// ForgetTenant removes a tenant from the tenant list when it has published nothing since
// before (and so has no live event): the janitor's last step for an idle tenant. It reports
// whether the entry was removed.
func (e *Events) ForgetTenant(ctx context.Context, tenant string, before time.Time) (bool, error) {
	sp, err := e.space(tenant)
	if err != nil {
		return false, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	key := e.platform().EventBusTenants()
	n, err := forgetScript.Exec(ctx, e.c, []string{key}, []string{sp.Tenant(), strconv.FormatInt(before.UnixMilli(), 10)}).AsInt64()
	if err != nil {
		return false, transient(ErrRedis, "write "+key, err)
	}
	return n == 1, nil
}

// forgetScript: KEYS[1] = the tenant list; ARGV = tenant, Unix ms. Removes the tenant only when
// its last publish is older than the time (a concurrent publish keeps it). One key.
var forgetScript = rueidis.NewLuaScript(`
local s = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if s ~= nil and s < tonumber(ARGV[2]) then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 1
end
return 0
`)

// ---- notifications -------------------------------------------------------------------------

// Listen subscribes to the notification channel of the key root and calls fn for each
// notification (with the decoding error of a payload that is not one), until ctx ends or the
// subscription fails. onSubscribed runs on every (re)subscription: the client subscribes again
// by itself after a lost connection, and what was published meanwhile reached nobody.
func (e *Events) Listen(ctx context.Context, onSubscribed func(), fn func(EventRef, error)) error {
	channel := e.platform().EventBusNotify()
	if onSubscribed != nil {
		ctx = rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
			if s.Kind == "subscribe" && s.Channel == channel {
				onSubscribed()
			}
		})
	}
	err := e.c.Receive(ctx, e.c.B().Subscribe().Channel(channel).Build(), func(m rueidis.PubSubMessage) {
		fn(DecodeNotification(m.Message))
	})
	if err != nil && ctx.Err() == nil {
		return transient(ErrRedis, "subscribe to "+channel, err)
	}
	return nil
}

// ---- one-shot wake-up markers --------------------------------------------------------------

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

// ---- subscriptions, as the filter reads them -----------------------------------------------

// SubscriptionRead is one member of a subscription index with its record.
type SubscriptionRead struct {
	ExecutionID string
	Sub         Subscription
	// Raw is the record as stored ("" when Missing): RemoveStaleSubscription deletes the
	// record only while it still holds exactly this.
	Raw string
	// Missing: the index lists the execution but its record is gone.
	Missing bool
	// Err: the record does not decode (ErrInvalid); it is left for an operator.
	Err error
}

// subscriptionPage bounds one index read of Subscriptions.
const subscriptionPage = 500

// expiredMargin is how long past its timeout an index member stays: a clock a little ahead
// of the worker's must not drop a wait that has not timed out yet.
const expiredMargin = time.Minute

// SubscriptionReads is what Subscriptions read of a subscription index.
type SubscriptionReads struct {
	Reads []SubscriptionRead
	// Invalid counts the index members that are no execution id (a ':' or braces, over 200
	// characters …): no worker writes one and no record can have one, so they are skipped and
	// removed from the index on the way — never an error that would hold the reconciler.
	Invalid int
}

// Subscriptions reads the uncorrelated waits of an event type in this tenant that have not
// timed out at now (the per-type index) with their records, in pages of a few hundred.
// Members that are no execution id are removed on the way (counted in Invalid); members that
// timed out are skipped (the delay role resumes them with their timeout) and dropped by the
// next registration of the type (PutSubscription). An index key that is not a sorted set is
// ErrInvalid: no retry reads it. Waits reads the correlated waits beside them.
func (ts *TenantStore) Subscriptions(ctx context.Context, eventType string, now time.Time) (SubscriptionReads, error) {
	idx, err := ts.subscriptionIndex(eventType)
	if err != nil {
		return SubscriptionReads{}, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	return ts.readIndex(ctx, idx, now, nil, false)
}

// readIndex pages through the per-type index idx from rank 0; first is the first page when
// read is true (the caller read it already).
func (ts *TenantStore) readIndex(ctx context.Context, idx string, now time.Time, first []string, read bool) (SubscriptionReads, error) {
	c, nowMs := ts.r.c, strconv.FormatInt(now.UnixMilli(), 10)
	var out SubscriptionReads
	for skip := int64(0); ; {
		ids := first
		if !read || skip > 0 {
			var err error
			ids, err = c.Do(ctx, c.B().Zrange().Key(idx).Min(nowMs).Max("+inf").Byscore().Limit(skip, subscriptionPage).Build()).AsStrSlice()
			switch {
			case isWrongType(err):
				return SubscriptionReads{}, fmt.Errorf("%w: %s is not a sorted set: %w", ErrInvalid, idx, err)
			case err != nil:
				return SubscriptionReads{}, transient(ErrRedis, "read "+idx, err)
			}
		}
		valid := ids[:0:0]
		var bad []string
		for _, id := range ids {
			if _, err := ts.sp.Subscription(id); err != nil {
				bad = append(bad, id)
				continue
			}
			valid = append(valid, id)
		}
		out.Invalid += len(bad)
		removed := int64(0)
		if len(bad) > 0 {
			// Best effort: a member left here is skipped again by the next read.
			removed, _ = c.Do(ctx, c.B().Zrem().Key(idx).Member(bad...).Build()).AsInt64()
		}
		reads, err := ts.readSubscriptions(ctx, valid)
		if err != nil {
			return SubscriptionReads{}, err
		}
		out.Reads = append(out.Reads, reads...)
		if len(ids) < subscriptionPage {
			return out, nil
		}
		// The members removed from this page no longer take a rank in the next.
		skip += int64(len(ids)) - removed
	}
}

// CorrelatedWait is a bucket member that events of a batch look up (docs/events.md,
// "Correlation"): an execution's suspension indexed under Term.
type CorrelatedWait struct {
	ExecutionID string
	Since       time.Time // the suspension's since (to the nanosecond)
	Term        state.Correlation
	// Events are the indexes, in the events given to Waits, of those whose value at the
	// term's path is the term's value: the only ones of the batch the wait can take.
	Events []int
	member string
}

// Waits is what Waits read: the candidates of a batch of events of one type.
type Waits struct {
	// Uncorrelated are the per-type index's waits with their records, as Subscriptions reads
	// them: every event of the type is checked against each.
	Uncorrelated SubscriptionReads
	// Correlated are the members of the buckets the events' values look up.
	Correlated []CorrelatedWait
	// Paths is how many paths correlated waits of the type are indexed by.
	Paths int
	// Invalid counts the paths and bucket members no writer makes, skipped and removed.
	Invalid int
}

// Waits reads what may take events of one type in this tenant (their data, decoded JSON, in
// publish order) at now: the uncorrelated waits, and for every path in use by correlated
// waits of the type (SubscriptionPaths) the bucket of each event's value at that path
// (SubscriptionBucket) — the paths and the first page of the index in one round trip, the
// buckets in a second, the index's records in a third. An event without a canonical value at a
// path looks up no bucket there: no wait indexed by that path can take it. What is not a
// sorted set where an index should be is ErrInvalid; a Redis failure ErrRedis.
//
// For one event with one path in use and nothing uncorrelated, that is three commands however
// many waits there are: the paths, the index, the event's bucket.
func (ts *TenantStore) Waits(ctx context.Context, eventType string, events []any, now time.Time) (Waits, error) {
	idx, err := ts.subscriptionIndex(eventType)
	if err != nil {
		return Waits{}, err
	}
	pathsKey, _ := ts.sp.SubscriptionPaths(eventType)
	ctx, cancel := opCtx(ctx)
	defer cancel()
	c, nowMs := ts.r.c, strconv.FormatInt(now.UnixMilli(), 10)
	res := c.DoMulti(ctx,
		c.B().Zrange().Key(pathsKey).Min(nowMs).Max("+inf").Byscore().Build(),
		c.B().Zrange().Key(idx).Min(nowMs).Max("+inf").Byscore().Limit(0, subscriptionPage).Build())
	members, err := res[0].AsStrSlice()
	switch {
	case isWrongType(err):
		return Waits{}, fmt.Errorf("%w: %s is not a sorted set: %w", ErrInvalid, pathsKey, err)
	case err != nil:
		return Waits{}, transient(ErrRedis, "read "+pathsKey, err)
	}
	first, err := res[1].AsStrSlice()
	switch {
	case isWrongType(err):
		return Waits{}, fmt.Errorf("%w: %s is not a sorted set: %w", ErrInvalid, idx, err)
	case err != nil:
		return Waits{}, transient(ErrRedis, "read "+idx, err)
	}
	var out Waits
	// The buckets the events look up, each with the events that look it up.
	type lookup struct {
		term   state.Correlation
		events []int
	}
	var order []string
	lookups := map[string]*lookup{}
	var badPaths []string
	for _, m := range members {
		path, ok := decodePath(m)
		if !ok {
			badPaths = append(badPaths, m)
			continue
		}
		out.Paths++
		for i, data := range events {
			v, ok := state.CorrelationValueAt(data, path)
			if !ok {
				continue
			}
			key, _ := ts.sp.SubscriptionBucket(eventType, m, v)
			l := lookups[key]
			if l == nil {
				l = &lookup{term: state.Correlation{Path: path, Value: v}}
				lookups[key] = l
				order = append(order, key)
			}
			l.events = append(l.events, i)
		}
	}
	if len(badPaths) > 0 {
		out.Invalid += len(badPaths)
		c.Do(ctx, c.B().Zrem().Key(pathsKey).Member(badPaths...).Build()) // best effort: skipped again next time
	}
	buckets, err := ts.readBuckets(ctx, order, now)
	if err != nil {
		return Waits{}, err
	}
	for i, key := range order {
		l, b := lookups[key], buckets[i]
		var bad []string
		for _, m := range b {
			id, since, ok := parseBucketMember(m)
			if !ok {
				bad = append(bad, m)
				continue
			}
			out.Correlated = append(out.Correlated, CorrelatedWait{ExecutionID: id, Since: since, Term: l.term, Events: l.events, member: m})
		}
		if len(bad) > 0 {
			out.Invalid += len(bad)
			c.Do(ctx, c.B().Zrem().Key(key).Member(bad...).Build()) // best effort
		}
	}
	if out.Uncorrelated, err = ts.readIndex(ctx, idx, now, first, true); err != nil {
		return Waits{}, err
	}
	return out, nil
}

// readBuckets reads the live members of buckets (the first pages pipelined, then each bucket
// that filled its page on its own).
func (ts *TenantStore) readBuckets(ctx context.Context, buckets []string, now time.Time) ([][]string, error) {
	out := make([][]string, len(buckets))
	if len(buckets) == 0 {
		return out, nil
	}
	c, nowMs := ts.r.c, strconv.FormatInt(now.UnixMilli(), 10)
	page := func(key string, skip int64) rueidis.Completed {
		return c.B().Zrange().Key(key).Min(nowMs).Max("+inf").Byscore().Limit(skip, subscriptionPage).Build()
	}
	cmds := make(rueidis.Commands, len(buckets))
	for i, key := range buckets {
		cmds[i] = page(key, 0)
	}
	read := func(key string, r rueidis.RedisResult) ([]string, error) {
		m, err := r.AsStrSlice()
		switch {
		case isWrongType(err):
			return nil, fmt.Errorf("%w: %s is not a sorted set: %w", ErrInvalid, key, err)
		case err != nil:
			return nil, transient(ErrRedis, "read "+key, err)
		}
		return m, nil
	}
	for i, r := range c.DoMulti(ctx, cmds...) {
		m, err := read(buckets[i], r)
		if err != nil {
			return nil, err
		}
		out[i] = m
		for skip := int64(len(m)); len(m) == subscriptionPage; skip += int64(len(m)) {
			if m, err = read(buckets[i], c.Do(ctx, page(buckets[i], skip))); err != nil {
				return nil, err
			}
			out[i] = append(out[i], m...)
		}
	}
	return out, nil
}

// RemoveCorrelatedWait removes a correlated wait's bucket member: the suspension it names is
// over (its execution moved on, was cancelled, was woken by this event). The member names its
// suspension, so a later one of the same execution in the same bucket stays. One command.
func (ts *TenantStore) RemoveCorrelatedWait(ctx context.Context, eventType string, w CorrelatedWait) (bool, error) {
	_, key, err := ts.bucket(eventType, w.Term)
	if err != nil {
		return false, err
	}
	m := w.member
	if m == "" {
		m = bucketMember(w.ExecutionID, w.Since)
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	n, err := ts.r.c.Do(ctx, ts.r.c.B().Zrem().Key(key).Member(m).Build()).AsInt64()
	if err != nil {
		return false, transient(ErrRedis, "remove the correlated wait of "+w.ExecutionID, err)
	}
	return n == 1, nil
}

// WaitingFor counts the executions of this tenant that may take an event of a type with data
// (decoded JSON) at now: the uncorrelated waits of the type and the correlated ones in the
// buckets of its values — the members, hints as the filter reads them (the states decide).
func (ts *TenantStore) WaitingFor(ctx context.Context, eventType string, data any, now time.Time) (int64, error) {
	idx, err := ts.subscriptionIndex(eventType)
	if err != nil {
		return 0, err
	}
	pathsKey, _ := ts.sp.SubscriptionPaths(eventType)
	ctx, cancel := opCtx(ctx)
	defer cancel()
	c, nowMs := ts.r.c, strconv.FormatInt(now.UnixMilli(), 10)
	res := c.DoMulti(ctx, c.B().Zrange().Key(pathsKey).Min(nowMs).Max("+inf").Byscore().Build(),
		c.B().Zcount().Key(idx).Min(nowMs).Max("+inf").Build())
	members, err := res[0].AsStrSlice()
	if err != nil {
		return 0, transient(ErrRedis, "read "+pathsKey, err)
	}
	n, err := res[1].AsInt64()
	if err != nil {
		return 0, transient(ErrRedis, "count "+idx, err)
	}
	var counts rueidis.Commands
	for _, m := range members {
		path, ok := decodePath(m)
		if !ok {
			continue
		}
		if v, ok := state.CorrelationValueAt(data, path); ok {
			key, _ := ts.sp.SubscriptionBucket(eventType, m, v)
			counts = append(counts, c.B().Zcount().Key(key).Min(nowMs).Max("+inf").Build())
		}
	}
	if len(counts) == 0 {
		return n, nil
	}
	for _, r := range c.DoMulti(ctx, counts...) {
		k, err := r.AsInt64()
		if err != nil {
			return 0, transient(ErrRedis, "count the correlated waits of "+eventType, err)
		}
		n += k
	}
	return n, nil
}

// readSubscriptions reads the records of valid execution ids.
func (ts *TenantStore) readSubscriptions(ctx context.Context, ids []string) ([]SubscriptionRead, error) {
	out := make([]SubscriptionRead, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	cmds := make(rueidis.Commands, 0, len(ids))
	for i, id := range ids {
		out[i].ExecutionID = id
		key, _ := ts.sp.Subscription(id) // checked by the caller
		cmds = append(cmds, ts.r.c.B().Get().Key(key).Build())
	}
	for i, res := range ts.r.c.DoMulti(ctx, cmds...) {
		r := &out[i]
		s, err := res.ToString()
		switch {
		case rueidis.IsRedisNil(err):
			r.Missing = true
		case isWrongType(err):
			r.Err = fmt.Errorf("%w: subscription of %s: %w", ErrInvalid, r.ExecutionID, err)
		case err != nil:
			return nil, transient(ErrRedis, "read subscriptions of "+ts.sp.Tenant(), err)
		default:
			r.Raw = s
			r.Sub, r.Err = DecodeSubscription(r.ExecutionID, []byte(s))
		}
	}
	return out, nil
}

// DecodeSubscription reads a subscription record of execution id strictly: JSON with the
// same execution id, a node, a valid event type and a since time (ErrInvalid otherwise).
func DecodeSubscription(id string, b []byte) (Subscription, error) {
	var sub Subscription
	if err := json.Unmarshal(b, &sub); err != nil {
		return Subscription{}, fmt.Errorf("%w: subscription of %s is not a record: %w", ErrInvalid, id, err)
	}
	switch {
	case sub.ExecutionID != id:
		return Subscription{}, fmt.Errorf("%w: the subscription of %s names execution %q", ErrInvalid, id, sub.ExecutionID)
	case sub.Node == "" || sub.Since.IsZero():
		return Subscription{}, fmt.Errorf("%w: the subscription of %s has no node or since", ErrInvalid, id)
	case keys.ValidName("event type", sub.EventType) != nil:
		return Subscription{}, fmt.Errorf("%w: the subscription of %s has event type %q", ErrInvalid, id, sub.EventType)
	}
	return sub, nil
}

// casDeleteScript: KEYS[1] = a record; ARGV[1] = the value it must still hold. One key.
var casDeleteScript = rueidis.NewLuaScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`)

// RemoveStaleSubscription removes an execution's uncorrelated subscription to an event type
// once its state shows it waits for something else (or nothing): the record — only while it
// still holds raw ("" = leave the record: it is gone, or it is not this index's), so a record
// the worker rewrote for a new suspension stays — and the index member. The record and the index live in two Cluster
// slots, so this is not one script: after removing the member it reads the record again and,
// when a new one appeared meanwhile (a worker registered a new uncorrelated wait of the same
// type between the two steps), puts the member back. It reports whether anything was removed.
//
// A member that is no execution id has no record: only the member is removed.
func (ts *TenantStore) RemoveStaleSubscription(ctx context.Context, executionID, eventType, raw string) (bool, error) {
	idx, err := ts.subscriptionIndex(eventType)
	if err != nil {
		return false, err
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	c := ts.r.c
	key, err := ts.sp.Subscription(executionID)
	if err != nil {
		n, err := c.Do(ctx, c.B().Zrem().Key(idx).Member(executionID).Build()).AsInt64()
		if err != nil {
			return false, transient(ErrRedis, "remove an invalid member of "+idx, err)
		}
		return n == 1, nil
	}
	if raw != "" {
		n, err := casDeleteScript.Exec(ctx, c, []string{key}, []string{raw}).AsInt64()
		if err != nil {
			return false, transient(ErrRedis, "remove subscription of "+executionID, err)
		}
		if n == 0 {
			return false, nil // rewritten meanwhile: it is current
		}
	}
	res := c.DoMulti(ctx, c.B().Zrem().Key(idx).Member(executionID).Build(), c.B().Get().Key(key).Build())
	if err := res[0].Error(); err != nil {
		return false, transient(ErrRedis, "remove subscription of "+executionID, err)
	}
	again, err := res[1].ToString()
	switch {
	case rueidis.IsRedisNil(err):
		return true, nil
	case err != nil:
		return true, transient(ErrRedis, "read subscription of "+executionID, err)
	}
	sub, err := DecodeSubscription(executionID, []byte(again))
	if err != nil || sub.EventType != eventType || sub.Correlation != nil {
		return true, nil // not a wait this index lists (a correlated one is in its bucket)
	}
	score := math.Inf(1)
	if !sub.ExpiresAt.IsZero() {
		score = float64(sub.ExpiresAt.UnixMilli())
	}
	if err := c.Do(ctx, c.B().Zadd().Key(idx).ScoreMember().ScoreMember(score, executionID).Build()).Error(); err != nil {
		return true, transient(ErrRedis, "restore subscription of "+executionID, err)
	}
	return true, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
