package store

import (
	"context"
	"fmt"
	"path"
	"slices"
	"sync"
	"time"
)

// Hub is Ephemeral in the process (local mode, `plaita dev` without Redis): subscriptions,
// mailboxes and records in memory, on the wall clock. It is safe for concurrent use; the zero
// value is not usable: NewHub.
type Hub struct {
	now func() time.Time

	mu      sync.Mutex
	subs    map[string]map[*hubSub]struct{} // channel → subscribers
	boxes   map[string]*hubBox
	records map[string]hubRecord
	sets    map[string]map[string]struct{}
}

type hubSub struct {
	s    *LiveSubscription
	msgs chan LiveMessage
}

type hubBox struct {
	values  []string
	expires time.Time
	added   chan struct{} // closed and replaced by every push
}

type hubRecord struct {
	value   string
	expires time.Time
}

// NewHub returns an empty hub.
func NewHub() *Hub {
	return &Hub{now: time.Now, subs: map[string]map[*hubSub]struct{}{}, boxes: map[string]*hubBox{},
		records: map[string]hubRecord{}, sets: map[string]map[string]struct{}{}}
}

var _ Ephemeral = (*Hub)(nil)

// Publish hands msg to every subscriber of channel; one that is behind loses it (Lost).
func (h *Hub) Publish(_ context.Context, channel string, msg []byte) (int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs[channel] {
		select {
		case sub.msgs <- LiveMessage{Channel: channel, Payload: slices.Clone(msg)}:
		default:
			sub.s.lost.Store(true)
		}
	}
	return int64(len(h.subs[channel])), nil
}

// Subscribe is live when it returns; it ends with Close or ctx.
func (h *Hub) Subscribe(ctx context.Context, channel string) (*LiveSubscription, error) {
	sctx, cancel := context.WithCancel(ctx)
	msgs := make(chan LiveMessage, SubscriptionBuffer)
	sub := &hubSub{s: &LiveSubscription{C: msgs, cancel: cancel, done: make(chan struct{})}, msgs: msgs}
	h.mu.Lock()
	if h.subs[channel] == nil {
		h.subs[channel] = map[*hubSub]struct{}{}
	}
	h.subs[channel][sub] = struct{}{}
	h.mu.Unlock()
	go func() {
		<-sctx.Done()
		h.mu.Lock()
		delete(h.subs[channel], sub)
		if len(h.subs[channel]) == 0 {
			delete(h.subs, channel)
		}
		close(msgs) // under the lock: no Publish sends on it afterwards
		h.mu.Unlock()
		close(sub.s.done)
	}()
	return sub.s, nil
}

// Listened matches the subscribed channels against each pattern (path.Match's globs, which
// are Redis's for names without a '/'). The hub has no pattern subscriptions.
func (h *Hub) Listened(_ context.Context, patterns ...string) ([][]string, bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([][]string, len(patterns))
	for ch := range h.subs {
		for i, p := range patterns {
			if ok, _ := path.Match(p, ch); ok {
				out[i] = append(out[i], ch)
			}
		}
	}
	return out, false, nil
}

// box is mailbox key, dropped when it expired (under h.mu).
func (h *Hub) box(key string, now time.Time) *hubBox {
	b := h.boxes[key]
	if b != nil && !now.Before(b.expires) {
		delete(h.boxes, key)
		b = nil
	}
	return b
}

// Push appends to a mailbox.
func (h *Hub) Push(_ context.Context, key, value string, ttl time.Duration) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	b := h.box(key, now)
	if b == nil {
		b = &hubBox{added: make(chan struct{})}
		h.boxes[key] = b
	}
	b.values = append(b.values, value)
	b.expires = now.Add(ttl)
	close(b.added)
	b.added = make(chan struct{})
	h.sweep(now)
	return nil
}

// Pop takes the oldest value, waiting up to wait.
func (h *Hub) Pop(ctx context.Context, key string, wait time.Duration) (string, bool, error) {
	t := time.NewTimer(max(wait, 0))
	defer t.Stop()
	for {
		h.mu.Lock()
		now := h.now()
		b := h.box(key, now)
		if b == nil { // an empty box to wait on, gone with its expiry
			b = &hubBox{added: make(chan struct{}), expires: now.Add(wait + time.Minute)}
			h.boxes[key] = b
		}
		if len(b.values) > 0 {
			v := b.values[0]
			b.values = b.values[1:]
			h.mu.Unlock()
			return v, true, nil
		}
		added := b.added
		h.mu.Unlock()
		select {
		case <-added:
		case <-t.C:
			return "", false, nil
		case <-ctx.Done():
			return "", false, fmt.Errorf("pop %s: %w", key, ctx.Err())
		}
	}
}

// SetRecord writes a record.
func (h *Hub) SetRecord(_ context.Context, key, value string, ttl time.Duration, onlyIfPresent bool) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	if _, live := h.record(key, now); onlyIfPresent && !live {
		return false, nil
	}
	h.records[key] = hubRecord{value: value, expires: now.Add(ttl)}
	h.sweep(now)
	return true, nil
}

// record is a live record (under h.mu).
func (h *Hub) record(key string, now time.Time) (hubRecord, bool) {
	r, ok := h.records[key]
	if ok && !now.Before(r.expires) {
		delete(h.records, key)
		return hubRecord{}, false
	}
	return r, ok
}

// sweep drops expired records and mailboxes nobody waits on, so a long-running process does
// not keep them (under h.mu).
func (h *Hub) sweep(now time.Time) {
	for k, r := range h.records {
		if !now.Before(r.expires) {
			delete(h.records, k)
		}
	}
	for k, b := range h.boxes {
		if !now.Before(b.expires) {
			delete(h.boxes, k)
		}
	}
}

// Records reads records.
func (h *Hub) Records(_ context.Context, keys ...string) ([]Record, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	out := make([]Record, len(keys))
	for i, k := range keys {
		if r, ok := h.record(k, now); ok {
			out[i] = Record{Value: r.value, Found: true}
		}
	}
	return out, nil
}

// DeleteRecord removes a record and its member.
func (h *Hub) DeleteRecord(_ context.Context, key, set, member string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.records, key)
	delete(h.sets[set], member)
	return nil
}

// AddMember adds to a set.
func (h *Hub) AddMember(_ context.Context, set, member string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sets[set] == nil {
		h.sets[set] = map[string]struct{}{}
	}
	h.sets[set][member] = struct{}{}
	return nil
}

// Members lists a set.
func (h *Hub) Members(_ context.Context, set string) ([]string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.sets[set]))
	for m := range h.sets[set] {
		out = append(out, m)
	}
	return out, nil
}

// RemoveMembers removes from a set.
func (h *Hub) RemoveMembers(_ context.Context, set string, members ...string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range members {
		delete(h.sets[set], m)
	}
	return nil
}
