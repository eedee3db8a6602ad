package queue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"plaita/model"

	"github.com/redis/rueidis"
)

// The List → Stream migration (docs/operations.md "drain-list"): the Python implementation's
// first versions queued tasks on a Redis List (RPUSH / BLPOP); this build reads a Stream. A
// ListDrain moves a List's items into the queue's stream without losing or duplicating one when
// the process dies at any point:
//
//  1. LMOVE list → processing (<list>:drain:processing): an item is always in one of the two;
//  2. one script adds the item to the stream and sets its one-shot marker
//     (<stream>:drained:<digest>) — or, when the marker exists (an earlier run sent it and died
//     before step 3), sends nothing;
//  3. LREM from processing.
//
// A run first finishes what the processing list holds (what a killed run left), then takes
// more. An item that cannot become a task (not a JSON envelope, a schema newer than this build)
// goes to <list>:drain:rejected in one script with its LREM, for an operator to read.
//
// The keys beside the list and the stream share their Cluster slot (sameSlot), so LMOVE and
// the scripts are cluster-safe.

// DrainedMarkerTTL is how long a sent item's marker is kept: a re-run after a crash within it
// sends nothing twice. Byte-identical items of one List are one task (the second finds the
// first's marker).
const DrainedMarkerTTL = 7 * 24 * time.Hour

// ErrListDrain is what a drain's refusals match: the List and the stream are one key, or a key
// holds another type than the drain needs.
var ErrListDrain = model.New(model.Conflict, "", "list drain refused")

// ListDrain moves one legacy List into the queue's stream. Safe for one drainer at a time per
// List (two drainers never send an item twice, but may report it twice as already sent).
type ListDrain struct {
	c          rueidis.Client
	list       string
	processing string
	rejected   string
	stream     string
	now        func() time.Time
}

// ListDrain is the drain of the legacy List list into this queue's stream.
func (q *Queue) ListDrain(list string) (*ListDrain, error) {
	switch {
	case list == "":
		return nil, fmt.Errorf("%w: empty List key", ErrListDrain)
	case list == q.stream:
		return nil, fmt.Errorf("%w: the List %q is the stream itself", ErrListDrain, list)
	case list == q.dlq:
		return nil, fmt.Errorf("%w: the List %q is the dead-letter stream", ErrListDrain, list)
	}
	side := sameSlot(list)
	rd, ok := q.d.(*RedisDriver)
	if !ok {
		return nil, fmt.Errorf("%w: the list drain moves a Redis List: it runs on Redis only", ErrInvalidEnvelope)
	}
	return &ListDrain{c: rd.c, list: list, processing: side + ":drain:processing", rejected: side + ":drain:rejected",
		stream: q.stream, now: q.Now}, nil
}

// Keys are the List, the processing list, the rejected list and the stream.
func (d *ListDrain) Keys() (list, processing, rejected, stream string) {
	return d.list, d.processing, d.rejected, d.stream
}

// ListState is what a drain finds before it starts.
type ListState struct {
	ListType   string `json:"list_type"`   // "list", "none" (empty or absent), or what else the key holds
	StreamType string `json:"stream_type"` // "stream" or "none"
	Length     int64  `json:"length"`      // items left on the List
	Processing int64  `json:"processing"`  // items a run took and did not finish
	Rejected   int64  `json:"rejected"`    // items set aside so far
}

// State reads the keys' types and lengths; a key of the wrong type is an ErrListDrain.
func (d *ListDrain) State(ctx context.Context) (ListState, error) {
	c := d.c
	res := c.DoMulti(ctx, c.B().Type().Key(d.list).Build(), c.B().Type().Key(d.stream).Build(),
		c.B().Type().Key(d.processing).Build(), c.B().Type().Key(d.rejected).Build())
	var s ListState
	types := make([]string, len(res))
	for i, r := range res {
		t, err := r.ToString()
		if err != nil {
			return s, fmt.Errorf("%w: drain %s: type: %w", ErrRedis, d.list, err)
		}
		types[i] = t
	}
	s.ListType, s.StreamType = types[0], types[1]
	switch {
	case s.ListType == "stream":
		return s, fmt.Errorf("%w: %s is a Stream already (nothing to drain)", ErrListDrain, d.list)
	case s.ListType != "list" && s.ListType != "none":
		return s, fmt.Errorf("%w: %s holds a %s, not a List", ErrListDrain, d.list, s.ListType)
	case s.StreamType != "stream" && s.StreamType != "none":
		return s, fmt.Errorf("%w: the stream key %s holds a %s (the legacy List itself?): drain into a new stream key", ErrListDrain, d.stream, s.StreamType)
	case types[2] != "list" && types[2] != "none", types[3] != "list" && types[3] != "none":
		return s, fmt.Errorf("%w: %s or %s holds a %s/%s, not a List", ErrListDrain, d.processing, d.rejected, types[2], types[3])
	}
	lens := c.DoMulti(ctx, c.B().Llen().Key(d.list).Build(), c.B().Llen().Key(d.processing).Build(), c.B().Llen().Key(d.rejected).Build())
	for i, dst := range []*int64{&s.Length, &s.Processing, &s.Rejected} {
		n, err := lens[i].AsInt64()
		if err != nil {
			return s, fmt.Errorf("%w: drain %s: llen: %w", ErrRedis, d.list, err)
		}
		*dst = n
	}
	return s, nil
}

// Take returns the next batch: what the processing list holds (a killed run's items come
// first), else up to n items moved there from the head of the List (LMOVE, in one round trip).
// An empty batch: the List is drained.
func (d *ListDrain) Take(ctx context.Context, n int) ([]string, error) {
	n = max(n, 1)
	c := d.c
	held, err := c.Do(ctx, c.B().Lrange().Key(d.processing).Start(0).Stop(int64(n-1)).Build()).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("%w: drain %s: read %s: %w", ErrRedis, d.list, d.processing, err)
	}
	if len(held) > 0 {
		return held, nil
	}
	cmds := make(rueidis.Commands, n)
	for i := range cmds {
		cmds[i] = c.B().Lmove().Source(d.list).Destination(d.processing).Left().Right().Build()
	}
	var out []string
	for _, r := range c.DoMulti(ctx, cmds...) {
		item, err := r.ToString()
		switch {
		case rueidis.IsRedisNil(err):
			continue
		case err != nil:
			// Whatever moved is on the processing list: the next Take returns it.
			return nil, fmt.Errorf("%w: drain %s: lmove: %w", ErrRedis, d.list, err)
		}
		out = append(out, item)
	}
	return out, nil
}

// Peek reads up to n items of the List from index start, and the processing list's items,
// writing nothing (a dry run).
func (d *ListDrain) Peek(ctx context.Context, start int64, n int) (items []string, err error) {
	c := d.c
	items, err = c.Do(ctx, c.B().Lrange().Key(d.list).Start(start).Stop(start+int64(max(n, 1))-1).Build()).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("%w: drain %s: lrange: %w", ErrRedis, d.list, err)
	}
	return items, nil
}

// Held reads the processing list whole (a dry run: what a killed run left).
func (d *ListDrain) Held(ctx context.Context) ([]string, error) {
	items, err := d.c.Do(ctx, d.c.B().Lrange().Key(d.processing).Start(0).Stop(-1).Build()).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("%w: drain %s: lrange %s: %w", ErrRedis, d.list, d.processing, err)
	}
	return items, nil
}

// ListItem is one List item read as a task.
type ListItem struct {
	Raw      string
	Digest   string   // sha256 of the List's name and the item: names its marker
	Envelope Envelope // valid when Err is nil
	// Derived: a start without execution_id got DeterministicExecutionID(list, Digest), the same
	// id for every run that reads this item.
	Derived bool
	Err     error // the item cannot become a task (it goes to the rejected list)
}

// Read decodes a List item as a task. The List predates schema_version: an item without one is
// read as version 1. An id-less start gets a deterministic id (Derived). The copy keeps the
// item's own schema_version and generation fields — a legacy item stays legacy, never gated —
// as every copy of an existing message does (Queue.Replay).
func (d *ListDrain) Read(raw string) ListItem {
	sum := sha256.Sum256([]byte(d.list + "\x00" + raw))
	it := ListItem{Raw: raw, Digest: hex.EncodeToString(sum[:16])}
	payload := []byte(raw)
	var probe map[string]json.RawMessage
	if json.Unmarshal(payload, &probe) == nil && probe != nil {
		if _, ok := probe["schema_version"]; !ok {
			probe["schema_version"] = json.RawMessage("1")
			payload, _ = json.Marshal(probe) // re-encoding a map decoded from JSON cannot fail
		}
	}
	it.Envelope, it.Derived, it.Err = Decode(d.list, it.Digest, payload)
	return it
}

// sendScript adds one drained item to the stream with its marker, once.
// KEYS: 1 stream, 2 marker. ARGV: 1 marker TTL (s), 2 payload.
// Returns {0, earlier stream id} (sent before) | {1, stream id}.
var sendScript = rueidis.NewLuaScript(`
local prev = redis.call('GET', KEYS[2])
if prev then return {0, prev} end
local id = redis.call('XADD', KEYS[1], '*', '` + PayloadField + `', ARGV[2])
redis.call('SET', KEYS[2], id, 'EX', ARGV[1])
return {1, id}
`)

// rejectScript moves one item from the processing list to the rejected list.
// KEYS: 1 processing, 2 rejected. ARGV: 1 item. Returns 1 when moved, 0 when it was not there.
var rejectScript = rueidis.NewLuaScript(`
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 0 then return 0 end
redis.call('RPUSH', KEYS[2], ARGV[1])
return 1
`)

// Sent is what Send did with one item.
type Sent struct {
	StreamID string // the entry that carries it
	Already  bool   // an earlier run (or a byte-identical item) sent it: nothing was added
}

// Marker is the one-shot marker key of an item.
func (d *ListDrain) Marker(it ListItem) string {
	return sameSlot(d.stream) + ":drained:" + it.Digest
}

// AlreadySent reports which items already carry a marker (a dry run's "already sent").
func (d *ListDrain) AlreadySent(ctx context.Context, items []ListItem) ([]bool, error) {
	if len(items) == 0 {
		return nil, nil
	}
	c := d.c
	cmds := make(rueidis.Commands, len(items))
	for i, it := range items {
		cmds[i] = c.B().Exists().Key(d.Marker(it)).Build()
	}
	out := make([]bool, len(items))
	for i, r := range c.DoMulti(ctx, cmds...) {
		n, err := r.AsInt64()
		if err != nil {
			return nil, fmt.Errorf("%w: drain %s: exists: %w", ErrRedis, d.list, err)
		}
		out[i] = n > 0
	}
	return out, nil
}

// Send adds valid items to the stream, each once (the script above), in one round trip.
func (d *ListDrain) Send(ctx context.Context, items []ListItem) ([]Sent, error) {
	if len(items) == 0 {
		return nil, nil
	}
	ttl := strconv.FormatInt(int64(DrainedMarkerTTL/time.Second), 10)
	execs := make([]rueidis.LuaExec, len(items))
	for i, it := range items {
		if it.Err != nil {
			return nil, fmt.Errorf("drain %s: item %s cannot be sent: %w", d.list, it.Digest, it.Err)
		}
		payload, err := it.Envelope.encode(d.now())
		if err != nil {
			return nil, fmt.Errorf("drain %s: item %s: %w", d.list, it.Digest, err)
		}
		execs[i] = rueidis.LuaExec{Keys: []string{d.stream, d.Marker(it)}, Args: []string{ttl, string(payload)}}
	}
	out := make([]Sent, len(items))
	for i, r := range sendScript.ExecMulti(ctx, d.c, execs...) {
		arr, err := r.ToArray()
		if err == nil && len(arr) != 2 {
			err = errors.New("unexpected reply")
		}
		if err != nil {
			return nil, fmt.Errorf("%w: drain %s: send %s: %w", ErrRedis, d.list, items[i].Digest, err)
		}
		wrote, _ := arr[0].AsInt64()
		out[i].StreamID, _ = arr[1].ToString()
		out[i].Already = wrote != 1
	}
	return out, nil
}

// Done removes sent items from the processing list (one LREM each, in one round trip).
func (d *ListDrain) Done(ctx context.Context, raws []string) error {
	if len(raws) == 0 {
		return nil
	}
	c := d.c
	cmds := make(rueidis.Commands, len(raws))
	for i, raw := range raws {
		cmds[i] = c.B().Lrem().Key(d.processing).Count(1).Element(raw).Build()
	}
	for _, r := range c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("%w: drain %s: lrem %s: %w", ErrRedis, d.list, d.processing, err)
		}
	}
	return nil
}

// Reject moves an item that cannot become a task to the rejected list.
func (d *ListDrain) Reject(ctx context.Context, raw string) error {
	if err := rejectScript.Exec(ctx, d.c, []string{d.processing, d.rejected}, []string{raw}).Error(); err != nil {
		return fmt.Errorf("%w: drain %s: reject: %w", ErrRedis, d.list, err)
	}
	return nil
}
