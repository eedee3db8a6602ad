//go:build !e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store/keys"
)

// Inputs that once broke the wake-up path, each with a worker, filter
// and delay role on a private Redis. The setup of each: a wait_event flow matching
// EVENT.k == INPUT.k, started with {"k":"u"} and left waiting.

// nestedData is {"k":"u","d":{"a":{"a":…}}}: the document is levels deep.
func nestedData(levels int) string {
	return `{"k":"u","d":` + strings.Repeat(`{"a":`, levels-1) + `1` + strings.Repeat(`}`, levels-1) + `}`
}

// An event id outside the id alphabet (invalid UTF-8 once became "bad\ufffdid" in the record
// while its key kept the \xff byte, and the filter could never read it) is refused before
// anything is written; so is a type outside the name alphabet.
func TestE2EAttackEventIDsAndTypesFromAFixedAlphabet(t *testing.T) {
	t.Parallel()
	s := newAttackStack(t, nil)
	for _, id := range []string{"bad\xffid", "caf\u00e9", "-rf", "a:b", "x{y}", strings.Repeat("i", 201)} {
		s.refused(2, "invalid execution id", "event", "publish", "T", "--id", id, "--data", `{"k":"u"}`)
	}
	for _, typ := range []string{"T\xff", "t\u00e9", "a b"} {
		s.refused(2, "invalid key name", "event", "publish", typ, "--data", `{"k":"u"}`)
	}
	if n := s.events(); n != 0 {
		t.Fatalf("%d events stored after refused publishes", n)
	}
	if st := s.wakes(`{"k":"u"}`); resumes(st) != 1 {
		t.Fatalf("woken %d times", resumes(st))
	}
}

// The nesting bound holds at every entry point: a document nested past it is refused where it
// enters (exit 2, nothing stored or enqueued), whatever carries it.
func TestE2EAttackNestingBoundAtEveryEntryPoint(t *testing.T) {
	t.Parallel()
	s := newAttackStack(t, nil)
	deep9999, deep10000 := writeFile(t, "9999.json", nestedData(9999)), writeFile(t, "10000.json", nestedData(10000))
	past := writeFile(t, "65.json", nestedData(state.MaxDocumentDepth+1))
	deepFlow := writeFile(t, "deep-flow.json", `{"id":"deep","vars":{"x":`+strings.Repeat("[", state.MaxDocumentDepth)+
		strings.Repeat("]", state.MaxDocumentDepth)+`},"start":"done","nodes":[{"id":"done","type":"end"}]}`)
	flow := writeFile(t, "attack.json", attackFlow)
	stateDir := t.TempDir()
	stream := func() int64 {
		n, err := s.srv.Client(t).Do(t.Context(), s.srv.Client(t).B().Xlen().Key("plaita:flow:queue").Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := stream()
	// At the bound it is taken (the event matches nothing).
	if r := run(t, s.env, "event", "publish", "T", "--data", strings.Replace(nestedData(state.MaxDocumentDepth), `"u"`, `"other"`, 1), "--quiet"); r.code != 0 {
		t.Fatalf("an event %d levels deep: exit %d %s", state.MaxDocumentDepth, r.code, r.stderr)
	}
	for _, tc := range []struct {
		entry string
		args  []string
		want  string
	}{
		{"event data (9,999 levels)", []string{"event", "publish", "T", "--data", "@" + deep9999}, "nested too deeply"},
		{"event data (10,000 levels)", []string{"event", "publish", "T", "--data", "@" + deep10000}, "nested too deeply"},
		{"event data (inline)", []string{"event", "publish", "T", "--data", nestedData(state.MaxDocumentDepth + 1)}, "nested too deeply"},
		{"start input", []string{"start", flow, "--input", "@" + past}, "nested too deeply"},
		{"schedule input", []string{"schedule", "add", "--cron", "* * * * * *", "--flow", "attack", "--input", "@" + past}, "nested too deeply"},
		{"resume data", []string{"execution", "resume", s.waiting, "--type", "event", "--data", "@" + deep9999}, "nested too deeply"},
		{"resume data (--force)", []string{"execution", "resume", s.waiting, "--type", "event", "--force", "--data", "@" + past}, "nested too deeply"},
		{"run input", []string{"run", flow, "--input", "@" + past, "--state-dir", stateDir}, "nested too deeply"},
		{"run resume data", []string{"run", flow, "--resume", "ex_1", "--type", "event", "--data", "@" + past, "--state-dir", stateDir}, "nested too deeply"},
		{"flow definition (start)", []string{"start", deepFlow}, "nest deeper than 64 levels"},
		{"flow definition (run)", []string{"run", deepFlow, "--state-dir", stateDir}, "nest deeper than 64 levels"},
	} {
		t.Run(tc.entry, func(t *testing.T) { s.refused(2, tc.want, tc.args...) })
	}
	// Node results: a loop that wraps a variable in itself a level a step ends in error at the
	// bound, in a state that still loads.
	wrap := writeFile(t, "wrap.json", `{"id":"wrap","vars":{"x":{}},"start":"wrap","nodes":[
		{"id":"wrap","type":"set","params":{"vars":{"x":"{{ {'a': VARS.x} }}"}},"next":"again"},
		{"id":"again","type":"condition","params":{"expr":"true"},"branches":{"true":"wrap","false":"done"}},
		{"id":"done","type":"end"}]}`)
	if r := run(t, s.env, "run", wrap, "--state-dir", stateDir, "--quiet"); r.code != 1 || !strings.Contains(r.stdout, "StateSerializationError") ||
		!strings.Contains(r.stdout, "nested too deeply") {
		t.Fatalf("node results: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if n := s.events(); n != 1 {
		t.Fatalf("%d events stored, want the one at the bound", n)
	}
	if n := stream(); n != before {
		t.Fatalf("the stream went from %d to %d entries", before, n)
	}
	if r := run(t, s.env, "schedule", "list", "--json", "--quiet"); r.code != 0 || strings.Contains(r.stdout, `"flow_id"`) {
		t.Fatalf("a schedule was stored: %s", r.stdout)
	}
	if st := s.show(s.waiting, ""); st.Status != state.Suspended {
		t.Fatalf("the waiting execution is %s", st.Status)
	}
	s.wakes(`{"k":"u"}`)
}

// A state that no longer decodes — what an event nested 9,999 levels deep made of a woken
// execution before the bound — stays in an operator's reach: show prints what is stored,
// resume is refused with what can be done, cancel replaces it with a cancelled state (later
// events find nothing to wake), delete removes another.
func TestE2EAttackUnreadableStateIsShownCancelledAndDeleted(t *testing.T) {
	t.Parallel()
	s := newAttackStack(t, nil)
	second := s.startDef("attack", attackFlow, "", `{"k":"v"}`)
	s.waitStatus(second, "", state.Suspended, 60*time.Second)
	c := s.srv.Client(t)
	corrupt := func(id string) []byte {
		key, _ := keys.MustFor("", "").Execution(id)
		raw, err := c.Do(t.Context(), c.B().Get().Key(key).Build()).AsBytes()
		if err != nil {
			t.Fatal(err)
		}
		// The state as that build saved it: the event's data under the wait's result, deeper
		// than encoding/json reads back.
		bad := bytes.Replace(raw, []byte(`"context":{`), []byte(`"context":{"deep":`+nestedData(10001)+`,`), 1)
		if bytes.Equal(bad, raw) {
			t.Fatalf("no context in %s", raw)
		}
		if err := c.Do(t.Context(), c.B().Set().Key(key).Value(string(bad)).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		return bad
	}
	bad := corrupt(s.waiting)
	corrupt(second)

	r := run(t, s.env, "execution", "show", s.waiting, "--quiet")
	if r.code != 0 || !strings.Contains(r.stdout, "its stored state cannot be read") || !strings.Contains(r.stdout, "flow attack version") ||
		!strings.Contains(r.stdout, "plaita execution cancel "+s.waiting) {
		t.Fatalf("show: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = run(t, s.env, "execution", "show", s.waiting, "--json", "--quiet")
	var view struct {
		Corrupt  bool `json:"corrupt"`
		Salvaged struct {
			FlowID string       `json:"flow_id"`
			Status state.Status `json:"status"`
		} `json:"salvaged"`
		RawBytes int    `json:"raw_bytes"`
		Raw      string `json:"raw"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &view) != nil || !view.Corrupt || view.Salvaged.FlowID != "attack" ||
		view.Salvaged.Status != state.Suspended || view.RawBytes != len(bad) || !strings.HasPrefix(string(bad), view.Raw) {
		t.Fatalf("show --json: exit %d %+v\n%.300s", r.code, view, r.stdout)
	}
	s.refused(1, "execution delete "+s.waiting, "execution", "resume", s.waiting, "--type", "event", "--data", `{"k":"u"}`)

	r = run(t, s.env, "execution", "cancel", s.waiting, "--quiet")
	if r.code != 0 || !strings.Contains(r.stdout, "cancelled") {
		t.Fatalf("cancel: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	st := s.show(s.waiting, "")
	if st.Status != state.Cancelled || st.Error == nil || st.Error.Type != "StateCorrupt" || st.FlowID != "attack" {
		t.Fatalf("after cancel: %s %+v", st.Status, st.Error)
	}
	// An event for it now finds a cancelled execution: nothing to wake, nothing broken.
	s.publishEvent("T", `{"k":"u"}`)
	if r := run(t, s.env, "execution", "cancel", s.waiting, "--quiet"); r.code != 0 || !strings.Contains(r.stdout, "already cancelled") {
		t.Fatalf("cancel again: exit %d %s%s", r.code, r.stdout, r.stderr)
	}

	if r := run(t, s.env, "execution", "delete", second, "--quiet"); r.code != 0 || !strings.Contains(r.stdout, "deleted (was corrupt)") {
		t.Fatalf("delete: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	s.refused(1, "no execution "+second, "execution", "show", second)
}

// Numbers reach EVENT exactly as published: an integer a float64 cannot hold (2^53 + 1) is
// refused at publish — it once arrived as …992 — and one it can hold arrives digit for digit.
func TestE2EAttackEventNumbersArriveExactly(t *testing.T) {
	t.Parallel()
	s := newAttackStack(t, nil)
	s.refused(2, "9007199254740993 has more digits than a 64-bit float keeps", "event", "publish", "T", "--data", `{"k":"u","n":9007199254740993}`)
	s.refused(2, "out of the range of a 64-bit float", "event", "publish", "T", "--data", `{"k":"u","n":1e400}`)
	s.refused(2, "more digits than a 64-bit float keeps", "execution", "resume", s.waiting, "--type", "event", "--data", `{"k":"u","n":9007199254740993}`)
	if n := s.events(); n != 0 {
		t.Fatalf("%d events stored", n)
	}
	s.wakes(`{"k":"u","n":9007199254740992}`)
	r := run(t, s.env, "execution", "show", s.waiting, "--json", "--quiet")
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.UseNumber()
	var st struct {
		Output struct {
			N json.Number `json:"n"`
		} `json:"output"`
	}
	if err := dec.Decode(&st); err != nil || st.Output.N.String() != "9007199254740992" {
		t.Fatalf("EVENT.n arrived as %q (%v)\n%s", st.Output.N, err, r.stdout)
	}
}
