package queue

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// A worker killed after the dead-letter step and before the ack: the entry and the marker were
// written together, so the redelivery only acks the source — one dead letter, never two.
func TestDeadLetterCrashBeforeAckLettersOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	id := b.enqueue(t, startEnv("f"))
	d := b.readOne(t, b.q, "w1")
	info, repeat, err := b.q.letter(testCtx(t), d, "poison") // the step; then "kill -9"
	if err != nil || repeat || info.DLQID == "" {
		t.Fatalf("letter: %+v %v %v", info, repeat, err)
	}
	if _, n := b.pendingOf(t, id); n != 1 {
		t.Fatalf("source not pending after the crash (count %d)", n)
	}
	// The marker is in the DLQ stream's slot: the script could write both at once.
	if got, want := slotTag(b.q.letteredKey(id)), slotTag(b.q.DLQKey()); got != want {
		t.Fatalf("marker hashes on %q, the DLQ on %q", got, want)
	}
	redelivered := d
	redelivered.Count, redelivered.Reclaimed = 2, true
	if err := b.q.DeadLetter(testCtx(t), redelivered, "poison"); err != nil {
		t.Fatal(err)
	}
	if es := b.dlq(t); len(es) != 1 || es[0].ID != info.DLQID {
		t.Fatalf("DLQ %+v, want only %s", es, info.DLQID)
	}
	if _, n := b.pendingOf(t, id); n != 0 {
		t.Fatalf("source still pending (count %d)", n)
	}
	if s := b.q.Stats(); s.DeadLettered != 0 {
		// letter alone does not count; the repeat only acks.
		t.Fatalf("dead-lettered counted %d times", s.DeadLettered)
	}
}

func TestSameSlot(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"plaita:flow:queue:dlq", "plaita:flow:queue:dlq"},
		{"{q}:dlq", "q"},
		{"x{tag}y{z}", "tag"},
	} {
		if got := slotTag(sameSlot(tc.key) + ":lettered:q:1-1"); got != tc.want || slotTag(tc.key) != tc.want {
			t.Errorf("%q: marker tag %q, key tag %q, want %q", tc.key, got, slotTag(tc.key), tc.want)
		}
	}
}

// slotTag is what Redis Cluster hashes for key: the first non-empty {…}, else the whole key.
func slotTag(key string) string {
	for i := 0; i < len(key); i++ {
		if key[i] == '{' {
			for j := i + 1; j < len(key); j++ {
				if key[j] == '}' {
					if j > i+1 {
						return key[i+1 : j]
					}
					return key
				}
			}
			return key
		}
	}
	return key
}

// An oversized entry is dead-lettered as a bounded prefix with its size, its sha256 and the
// reason; it cannot be replayed. A small malformed one is kept whole.
func TestDeadLetterKeepsABoundedPrefixOfOversizedPayloads(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	big := strings.Repeat("garbage!", (8<<20)/8) // 8 MiB that is no envelope
	bigID := b.xadd(t, "*", PayloadField, big)
	smallID := b.xadd(t, "*", PayloadField, "not json")
	for range 2 {
		d := b.readOne(t, b.q, "w1")
		if v := b.q.Gate(d); v != VerdictDeadLetterMalformed {
			t.Fatalf("gate %s", v)
		}
		if err := b.q.Apply(testCtx(t), d, VerdictDeadLetterMalformed); err != nil {
			t.Fatal(err)
		}
	}
	bySource := map[string]DLQEntry{}
	for _, e := range b.dlq(t) {
		bySource[e.SourceID] = e
	}
	e := bySource[bigID]
	sum := sha256.Sum256([]byte(big))
	if !e.Truncated || len(e.Payload) != DLQPayloadPrefix || e.Payload != big[:DLQPayloadPrefix] ||
		e.PayloadSize != len(big) || e.PayloadSHA256 != hex.EncodeToString(sum[:]) || e.Reason != ReasonMalformed {
		t.Fatalf("oversized dead letter: truncated %v, %d bytes kept, size %d, sha %s, reason %s",
			e.Truncated, len(e.Payload), e.PayloadSize, e.PayloadSHA256, e.Reason)
	}
	if _, err := b.q.Replay(testCtx(t), e.ID); !errors.Is(err, ErrReplayRefused) {
		t.Fatalf("replay of a truncated dead letter: %v", err)
	}
	if s := bySource[smallID]; s.Truncated || s.Payload != "not json" {
		t.Fatalf("small dead letter %+v", s)
	}
	// Nothing of the 8 MiB is left in Redis beyond the prefix.
	mem, err := b.c.Do(testCtx(t), b.c.B().MemoryUsage().Key(b.q.DLQKey()).Build()).AsInt64()
	if err != nil || mem > 1<<20 {
		t.Fatalf("the DLQ uses %d bytes (%v)", mem, err)
	}
}
