package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"plaita/store/keys"
)

// The event bus of a key root: publish (the record, its indexes and the notification), read
// one or many, and list a tenant's events a page at a time (events.go has the keys).

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
