package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

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

// Events is the event bus of one key root, over a driver (EventsDriver: Redis for the
// cluster, the console's database in local mode). It is safe for concurrent use.
type Events struct {
	d    EventsDriver
	root string
	s    EventSettings
	// Now is the clock of publish times and marker ages (NewEvents sets time.Now; tests
	// replace it before first use).
	Now func() time.Time
}

// NewEvents returns the event bus over d under root ("" = keys.DefaultRoot).
func NewEvents(d EventsDriver, s EventSettings, root string) *Events {
	if root == "" {
		root = keys.DefaultRoot
	}
	if s.TTL < time.Second {
		s.TTL = DefaultEventTTL
	}
	return &Events{d: d, root: root, s: s, Now: time.Now}
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
// same id is ErrEventConflict and nothing is written. Bad input is ErrBadEvent; a storage
// failure is transient (ErrRedis on Redis).
//
// Two round trips: the record (Put: SET NX, so a notified filter finds it), then the index,
// the feed, the tenant list and the notification (Index: pipelined); the write-side prune
// adds two, at most once a minute per (tenant, type).
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
	stored, duplicate = ev, false
	for attempt := 0; ; attempt++ {
		if attempt == eventPublishAttempts {
			return Event{}, false, fmt.Errorf("%w: publish event %s: its record expired %d times while it was read", ErrRedis, ev.ID, attempt)
		}
		created, err := e.d.Put(ctx, sp, ev.ID, rec, e.s.TTL)
		if err != nil {
			return Event{}, false, err
		}
		if created {
			break
		}
		recs, err := e.d.Records(ctx, sp, []string{ev.ID})
		if err != nil {
			return Event{}, false, err
		}
		r := recs[0]
		switch {
		case r.Err != nil:
			// Something that is no record holds the id (a WRONGTYPE key): a failed read.
			return Event{}, false, transient(ErrRedis, "read event "+ev.ID, r.Err)
		case !r.Found:
			continue // expired in between: publish it afresh
		}
		old, err := DecodeEvent([]byte(r.Value))
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

// eventMember is an event as the indexes hold it.
func eventMember(r EventRef) EventMember {
	return EventMember{Type: r.Type, ID: r.ID, Feed: feedMember(r.Type, r.ID)}
}

// index writes an event's index and feed members, the tenant's entry in the tenant list and
// the notification, and runs the write-side prune when it is due.
func (e *Events) index(ctx context.Context, sp keys.Space, ev Event) error {
	ref := EventRef{TenantID: sp.Tenant(), Type: ev.Type, ID: ev.ID}
	note, _ := json.Marshal(ref)
	w := EventIndexWrite{EventMember: eventMember(ref), Score: ev.PublishedAt.UnixMilli(), TTL: e.s.TTL,
		TenantAt: e.Now().UnixMilli(), Channel: e.platform().EventBusNotify(), Note: note}
	if !e.s.DisablePruneOnWrite {
		w.Throttle = pruneEvery
	}
	due, err := e.d.Index(ctx, sp, w)
	if err != nil {
		return err
	}
	if due {
		// The prune is a fallback of the janitor: an event is published without it.
		_, _ = e.pruneIndex(ctx, sp, ev.Type)
	}
	return nil
}

// pruneIndex checks the pruneBatch oldest members of a type's index and removes those whose
// record is gone (from the index and the feed). It returns how many it removed.
func (e *Events) pruneIndex(ctx context.Context, sp keys.Space, eventType string) (int, error) {
	ids, err := e.d.Ranks(ctx, sp, EventSet{Kind: EventTypeIndex, Type: eventType}, 0, pruneBatch-1)
	if err != nil {
		return 0, err
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
	var valid []EventRef
	var ids []string
	var removes []EventMember
	for _, r := range refs {
		if _, err := sp.Event(r.ID); err != nil {
			// A member that can never have a record: it goes at once.
			removes = append(removes, eventMember(r))
			continue
		}
		valid = append(valid, r)
		ids = append(ids, r.ID)
	}
	if len(ids) > 0 {
		exist, err := e.d.Exist(ctx, sp, ids)
		if err != nil {
			return 0, err
		}
		for i, ok := range exist {
			if !ok {
				removes = append(removes, eventMember(valid[i]))
			}
		}
	}
	if len(removes) == 0 {
		return 0, nil
	}
	if err := e.d.Unindex(ctx, sp, removes); err != nil {
		return 0, err
	}
	return len(removes), nil
}

// Get reads one event of a tenant: ErrEventNotFound when it does not exist (or expired),
// ErrBadEvent when the stored bytes are not a record of this id and tenant, a transient error
// (ErrRedis on Redis) when the storage does not answer.
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
	recs, err := e.d.Records(ctx, sp, []string{id})
	if err != nil {
		return Event{}, err
	}
	r := recs[0]
	switch {
	case r.Err != nil:
		return Event{}, fmt.Errorf("%w: %s holds no string: %w", ErrBadEvent, key, r.Err)
	case !r.Found:
		return Event{}, fmt.Errorf("%w: %s in tenant %s", ErrEventNotFound, id, sp.Tenant())
	}
	return decodeEventAt(key, id, sp.Tenant(), []byte(r.Value))
}

// GetMany reads several events of a tenant in one round trip (the filter's reconciler reads a
// page of the feed so): for each id, the event or the error Get would return for it
// (ErrEventNotFound, ErrBadEvent). A storage failure fails the whole read (transient).
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

// indexPage reads up to limit members of a set after cur, newest first (the driver's Page),
// and the cursor of the next page ("" when the set ended before limit).
func (e *Events) indexPage(ctx context.Context, sp keys.Space, set EventSet, cur cursor, limit int) (members []string, next string, err error) {
	rows, err := e.d.Page(ctx, sp, set, ScoredMember{Member: cur.Member, Score: cur.Score}, limit)
	if err != nil {
		return nil, "", err
	}
	members = make([]string, 0, len(rows))
	for _, r := range rows {
		members = append(members, r.Member)
		cur = cursor{Score: r.Score, Member: r.Member}
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
// one. A malformed cursor, type or limit is ErrInvalid; a storage failure is transient.
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
	set := EventSet{Kind: EventFeed}
	if eventType != "" {
		if _, err = sp.EventIndex(eventType); err != nil {
			return EventPage{}, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		set = EventSet{Kind: EventTypeIndex, Type: eventType}
	}
	ctx, cancel := opCtx(ctx)
	defer cancel()
	members, next, err := e.indexPage(ctx, sp, set, cur, limit)
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
			_ = e.d.Drop(ctx, sp, set, m) // best effort: found and dropped again next time
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

// getMany reads several records in one round trip (the driver's Records).
func (e *Events) getMany(ctx context.Context, sp keys.Space, refs []EventRef) ([]eventRead, error) {
	out := make([]eventRead, len(refs))
	ids := make([]string, 0, len(refs))
	pos := make([]int, 0, len(refs))
	for i, r := range refs {
		if _, err := sp.Event(r.ID); err != nil {
			out[i].missing = true
			continue
		}
		ids = append(ids, r.ID)
		pos = append(pos, i)
	}
	if len(ids) == 0 {
		return out, nil
	}
	recs, err := e.d.Records(ctx, sp, ids)
	if err != nil {
		return nil, err
	}
	for j, rec := range recs {
		i := pos[j]
		switch {
		case rec.Err != nil:
			out[i].err = fmt.Errorf("%w: %w", ErrBadEvent, rec.Err)
		case !rec.Found:
			out[i].missing = true
		default:
			key, _ := sp.Event(refs[i].ID)
			out[i].ev, out[i].err = decodeEventAt(key, refs[i].ID, sp.Tenant(), []byte(rec.Value))
		}
	}
	return out, nil
}
