//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/queue"
)

// `plaita drain-list` as the runbook's migration uses it: the legacy List is plaita:flow:queue,
// the workers read plaita:flow:queue:v2. First a few legacy items (no schema_version) run to
// completion on a real worker once drained; then a drain of 20,000 items is killed with
// SIGKILL mid-way and run again: every item is in the stream exactly once, nothing is left on
// the List or the processing list, and the progress is logged. An item that cannot become a
// task is set aside and makes the command exit 1.
func TestE2EDrainListSurvivesKill9(t *testing.T) {
	t.Parallel()
	const list, stream = "plaita:flow:queue", "plaita:flow:queue:v2"
	s := newStack(t, withEnv(cliEnv()), withEnv(map[string]string{"PLAITA_QUEUE_NAME": stream}))
	push := func(items []string) {
		t.Helper()
		for len(items) > 0 {
			n := min(len(items), 1000)
			if err := s.c.Do(s.ctx, s.c.B().Rpush().Key(list).Element(items[:n]...).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			items = items[n:]
		}
	}
	llen := func(key string) int64 {
		n, err := s.c.Do(s.ctx, s.c.B().Llen().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Legacy items run once drained.
	s.cli("flow", "publish", repoFlow(t, "hello.json"))
	worker := s.start("worker", nil)
	var ids []string
	var items []string
	for i := range 3 {
		ids = append(ids, fmt.Sprintf("ex_legacy_%d", i))
		items = append(items, fmt.Sprintf(`{"kind":"start","flow_id":"hello","flow_version":"1","execution_id":%q,"input":{"name":"list %d"}}`, ids[i], i))
	}
	push(items)
	if out := s.cli("drain-list", "--list-key", list); !strings.Contains(out, "sent 3 item(s)") {
		t.Fatalf("drain-list said:\n%s", out)
	}
	for _, id := range ids {
		if st := s.waitDone(id); st.Status != state.Completed {
			t.Fatalf("%s: %s", id, st.Status)
		}
	}
	worker.stop(t) // the stream now only fills: its length counts what the drain sent

	const n = 20000
	items = items[:0]
	for i := range n {
		items = append(items, fmt.Sprintf(`{"kind":"start","flow_id":"hello","flow_version":"1","input":{"i":%d}}`, i))
	}
	push(items)
	base := s.streamLen()
	first := spawn(t, s.env, "drain-list", "--list-key", list, "--batch", "3", "--log-format", "json")
	// Killed once a good part is in the stream and much is still on the List.
	deadline := time.Now().Add(60 * time.Second)
	for s.streamLen()-base < 1000 {
		if time.Now().After(deadline) {
			t.Fatalf("the drain sent %d items in 60 s\n%s", s.streamLen()-base, first.stderr.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	// A few milliseconds more, at random: the kill lands anywhere in a batch (polling the
	// stream's length alone times it right after a send).
	time.Sleep(time.Duration(rand.IntN(4000)) * time.Microsecond)
	first.kill9(t)
	left := llen(list)
	if left == 0 {
		t.Fatalf("the drain had finished before the kill: nothing was tested\n%s", first.stderr.String())
	}
	if len(logLines(first.stderr.String(), "drain_list.progress")) == 0 {
		t.Errorf("no progress line before the kill:\n%s", first.stderr.String())
	}
	t.Logf("killed with %d item(s) sent, %d on the List, %d on the processing list", s.streamLen()-base, left, llen("{"+list+"}:drain:processing"))

	r := run(t, s.env, "drain-list", "--list-key", list, "--json", "--log-format", "json")
	if r.code != 0 {
		t.Fatalf("the second run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var rep struct {
		Sent        int `json:"sent"`
		AlreadySent int `json:"already_sent"`
		After       struct {
			Length, Processing, Rejected int64
		} `json:"after"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	if len(logLines(r.stderr, "drain_list.progress")) == 0 || len(logLines(r.stderr, "drain_list.done")) != 1 {
		t.Errorf("the second run logged no progress or no end:\n%s", r.stderr)
	}
	if rep.After.Length != 0 || rep.After.Processing != 0 || llen(list) != 0 || llen("{"+list+"}:drain:processing") != 0 {
		t.Fatalf("left behind: %+v", rep.After)
	}
	// Every item once: n entries, n distinct execution ids, every input once.
	es, err := s.c.Do(s.ctx, s.c.B().Xrange().Key(stream).Start("-").End("+").Build()).AsXRange()
	if err != nil {
		t.Fatal(err)
	}
	execs, inputs := map[string]bool{}, map[string]bool{}
	for _, e := range es {
		env, _, err := queue.Decode(stream, e.ID, []byte(e.FieldValues[queue.PayloadField]))
		if err != nil {
			t.Fatalf("entry %s: %v", e.ID, err)
		}
		if execs[env.ExecutionID] || inputs[string(env.Input)] {
			t.Fatalf("%s (%s) is in the stream twice", env.ExecutionID, env.Input)
		}
		execs[env.ExecutionID], inputs[string(env.Input)] = true, true
	}
	if len(es) != n || int64(len(es)) != s.streamLen() {
		t.Fatalf("%d entries in the stream, want %d (second run: sent %d, already sent %d)", len(es), n, rep.Sent, rep.AlreadySent)
	}
	t.Logf("second run: sent %d, already sent %d (sent by the killed run, not yet removed from the processing list)", rep.Sent, rep.AlreadySent)

	// An item no worker could run is set aside, and the command says so.
	push([]string{"not a task"})
	r = run(t, s.env, "drain-list", "--list-key", list, "--quiet")
	if r.code != 1 || !strings.Contains(r.stderr, "{"+list+"}:drain:rejected") || !strings.Contains(r.stdout, "1 set aside") {
		t.Fatalf("a rejected item: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
