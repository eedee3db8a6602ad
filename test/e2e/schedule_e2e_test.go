//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"plaita/config"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/store"
	"plaita/store/keys"
	"plaita/test/redistest"
)

// Acceptance scenarios of the schedule role: real `plaita schedule` and `plaita worker`
// processes on a private redis-server, driven by the CLI. While ticks are counted no worker
// runs, so every start the schedule processes enqueued is still in the stream to be counted.

// schedCheck is PLAITA_CHECK_INTERVAL in these tests: five passes per tick of an every-second
// schedule, so a pass delayed by a loaded machine still finds each tick before the next one.
const schedCheck = "0.2"

// newScheduleE2E is the schedule suite's stack (PLAITA_CHECK_INTERVAL=schedCheck), extra on top.
func newScheduleE2E(t *testing.T, extra map[string]string) *stack {
	t.Helper()
	env := map[string]string{"PLAITA_CHECK_INTERVAL": schedCheck}
	maps.Copy(env, extra)
	return newStack(t, withTimeout(4*time.Minute), withEnv(env))
}

func (e *stack) publishFile(tenant, name string) {
	e.t.Helper()
	path := repoFlow(e.t, name)
	// `plaita start FLOW.json` is how the CLI publishes: it also starts one execution, which
	// the tests tell apart from the schedule's by execution id.
	e.cli("start", path, "--tenant", tenant)
}

func compactJSON(t *testing.T, raw []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return b.String()
}

// starts counts the schedule's starts in the task stream, per tick.
func (e *stack) starts(rec store.ScheduleRecord) map[time.Time]int {
	e.t.Helper()
	stream := config.QueueName.In(e.cfg)
	entries, err := e.c.Do(e.ctx, e.c.B().Xrange().Key(stream).Start("-").End("+").Build()).AsXRange()
	if err != nil {
		e.t.Fatalf("xrange: %v", err)
	}
	byID := ticks(rec)
	out := map[time.Time]int{}
	for _, en := range entries {
		env, _, err := queue.Decode(stream, en.ID, []byte(en.FieldValues[queue.PayloadField]))
		if err != nil {
			e.t.Fatalf("entry %s: %v", en.ID, err)
		}
		if tick, ok := byID[env.ExecutionID]; ok {
			if env.Kind != queue.KindStart || env.Tenant() != rec.TenantID || env.FlowID != rec.FlowID {
				e.t.Fatalf("start of tick %s: %+v", tick, env)
			}
			out[tick]++
		}
	}
	return out
}

// waitStarts waits until the schedule has starts for at least n ticks.
func (e *stack) waitStarts(rec store.ScheduleRecord, n int, timeout time.Duration, procs ...*proc) map[time.Time]int {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := e.starts(rec)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%d ticks fired in %s, want %d\n%s", len(got), timeout, n, logs(procs))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// onceEach checks one start per tick, for consecutive ticks (no tick lost), and returns them
// sorted.
func onceEach(t *testing.T, got map[time.Time]int) []time.Time {
	t.Helper()
	var ts []time.Time
	for tick, n := range got {
		if n != 1 {
			t.Errorf("tick %s fired %d times", tick.Format(time.RFC3339), n)
		}
		ts = append(ts, tick)
	}
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	for i := 1; i < len(ts); i++ {
		if d := ts[i].Sub(ts[i-1]); d != time.Second {
			t.Errorf("ticks %s and %s are %s apart: a tick was lost", ts[i-1].Format(time.RFC3339), ts[i].Format(time.RFC3339), d)
		}
	}
	return ts
}

// The acceptance: a cron schedule every second with two schedule processes fires exactly once
// per tick over 10 ticks — one stream entry per tick, and one execution per tick once a worker
// runs them. Both processes register, serve /readyz and count their starts.
func TestE2EScheduleTwoProcessesFireEachTickOnce(t *testing.T) {
	t.Parallel()
	e := newScheduleE2E(t, nil)
	e.publishFile("default", "hello.json")
	port := redistest.FreePort(t)
	a := e.spawn("schedule", map[string]string{"PLAITA_INSTANCE_ID": "sched-a", "PLAITA_METRICS_PORT": strconv.Itoa(port)})
	b := e.spawn("schedule", map[string]string{"PLAITA_INSTANCE_ID": "sched-b"})
	rec := e.addSchedule("tick", "--cron", "* * * * * *", "--flow", "hello", "--input", `{"name":"cron"}`)
	e.waitStarts(rec, 12, 90*time.Second, a, b)
	a.stop(t)
	b.stop(t)
	got := e.starts(rec) // with anything the last passes added
	if ts := onceEach(t, got); len(ts) < 10 {
		t.Fatalf("%d ticks", len(ts))
	}
	if t.Failed() {
		t.Fatalf("starts per tick %v\n%s", got, logs([]*proc{a, b}))
	}
	for _, w := range []*proc{a, b} {
		for _, ev := range []string{`"event":"schedule.started"`, `"event":"schedule.stopped"`} {
			if !strings.Contains(w.stderr.String(), ev) {
				t.Errorf("no %s in the log", ev)
			}
		}
	}

	// One execution per tick: a worker runs every start, each to completion, once.
	e.start("worker", nil)
	for tick := range got {
		id := store.ScheduleExecutionID(rec.TenantID, rec.ID, rec.CreatedAt, tick)
		st := e.waitTerminal(id, 60*time.Second)
		if st.Status != state.Completed || st.FlowID != "hello" || st.StepCount == 0 {
			t.Fatalf("execution of tick %s: %s %+v", tick, st.Status, st.Error)
		}
	}
	// The schedule's fire history: its newest ticks, newest first, each with the execution its
	// start is and that execution's status (every one completed by the worker above).
	var fires struct {
		Items []struct {
			Tick        time.Time `json:"tick"`
			ExecutionID string    `json:"execution_id"`
			Status      string    `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(e.cli("schedule", "fires", "tick", "--limit", "5", "--json")), &fires); err != nil {
		t.Fatal(err)
	}
	if len(fires.Items) != 5 {
		t.Fatalf("fires: %+v", fires.Items)
	}
	for i, f := range fires.Items {
		fired := false
		for tick := range got {
			fired = fired || tick.Equal(f.Tick)
		}
		if !fired || f.ExecutionID != store.ScheduleExecutionID(rec.TenantID, rec.ID, rec.CreatedAt, f.Tick) || f.Status != "completed" ||
			(i > 0 && !f.Tick.Before(fires.Items[i-1].Tick)) {
			t.Errorf("fire %d: %+v (fired %v)", i, f, fired)
		}
	}
	var list struct {
		Items []struct {
			ExecutionID string `json:"execution_id"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(e.cli("execution", "list", "--limit", "500", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	byID, n := ticks(rec), 0
	seen := map[string]bool{}
	for _, it := range list.Items {
		if _, ok := byID[it.ExecutionID]; ok {
			if seen[it.ExecutionID] {
				t.Fatalf("execution %s listed twice", it.ExecutionID)
			}
			seen[it.ExecutionID] = true
			n++
		}
	}
	if n != len(got) {
		t.Fatalf("%d executions for %d ticks", n, len(got))
	}
}

// The role's endpoints and registry record while it runs.
func TestE2EScheduleHealthAndRegistry(t *testing.T) {
	t.Parallel()
	e := newScheduleE2E(t, nil)
	port := redistest.FreePort(t)
	a := e.spawn("schedule", map[string]string{"PLAITA_INSTANCE_ID": "sched-h", "PLAITA_METRICS_PORT": strconv.Itoa(port)})
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if code, _ := get("/readyz"); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never 200\n%s", a.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body := get("/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz %d %q", code, body)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		_, body := get("/metrics")
		if strings.Contains(body, "plaita_schedule_passes_total") && strings.Contains(body, "plaita_schedule_heartbeat_timestamp_seconds") &&
			!strings.Contains(body, "plaita_schedule_passes_total 0\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks the scheduler's passes:\n%s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	raw, err := e.c.Do(e.ctx, e.c.B().Get().Key(keys.MustFor("", "").RegistryInstance("sched-h")).Build()).ToString()
	if err != nil {
		t.Fatalf("no registry record: %v", err)
	}
	var reg store.InstanceRecord
	if err := json.Unmarshal([]byte(raw), &reg); err != nil || reg.Role != "schedule" || reg.Status != "running" || reg.Queue != "plaita:flow:queue" {
		t.Fatalf("registry record %s (%v)", raw, err)
	}
	a.stop(t)
	if n, _ := e.c.Do(e.ctx, e.c.B().Exists().Key(keys.MustFor("", "").RegistryInstance("sched-h")).Build()).AsInt64(); n != 0 {
		t.Error("the stopped schedule process is still registered")
	}
}

// A disabled tenant's schedule does not fire (its ticks are recorded as skipped); another
// tenant's beside it does. Active again, it fires from then on, never the skipped ticks.
func TestE2EScheduleDisabledTenantDoesNotFire(t *testing.T) {
	t.Parallel()
	e := newScheduleE2E(t, nil)
	e.publishFile("acme", "hello.json")
	e.publishFile("beta", "hello.json")
	// The console writes tenant status; this test stands in for it.
	status := keys.MustFor("", "").TenantStatus()
	if err := e.c.Do(e.ctx, e.c.B().Hset().Key(status).FieldValue().FieldValue("acme", "disabled").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	acme := e.addSchedule("job", "--tenant", "acme", "--cron", "* * * * * *", "--flow", "hello")
	beta := e.addSchedule("job", "--tenant", "beta", "--cron", "* * * * * *", "--flow", "hello")
	s := e.spawn("schedule", nil)
	e.waitStarts(beta, 4, 60*time.Second, s)
	rec := e.showSchedule("acme", "job")
	if rec.LastSkip == nil || !strings.Contains(rec.LastSkip.Reason, "disabled") || rec.LastFire != nil {
		t.Fatalf("acme's schedule while its tenant is disabled: %+v", rec)
	}
	if got := e.starts(acme); len(got) != 0 {
		t.Fatalf("a disabled tenant's schedule fired: %v", got)
	}
	lastSkipped := rec.LastSkip.Tick
	if err := e.c.Do(e.ctx, e.c.B().Hset().Key(status).FieldValue().FieldValue("acme", "active").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	got := e.waitStarts(acme, 2, 60*time.Second, s)
	s.stop(t)
	for tick := range e.starts(acme) {
		if !tick.After(lastSkipped) {
			t.Errorf("tick %s, skipped while the tenant was disabled, fired later", tick)
		}
	}
	onceEach(t, got)
}

// After both schedule processes stop for five seconds, the schedule fires once for the ticks
// it missed (the newest), not five times.
func TestE2EScheduleAfterAStopFiresOnceForTheMissedTicks(t *testing.T) {
	t.Parallel()
	e := newScheduleE2E(t, nil)
	e.publishFile("default", "hello.json")
	rec := e.addSchedule("catchup", "--cron", "* * * * * *", "--flow", "hello")
	a, b := e.spawn("schedule", nil), e.spawn("schedule", nil)
	e.waitStarts(rec, 2, 60*time.Second, a, b)
	a.stop(t)
	b.stop(t)
	before := e.starts(rec)
	last := onceEach(t, before)
	stoppedAt := time.Now()
	time.Sleep(5 * time.Second) // the downtime itself, not a wait for an outcome
	a, b = e.spawn("schedule", nil), e.spawn("schedule", nil)
	restarted := time.Now()
	e.waitStarts(rec, len(before)+3, 60*time.Second, a, b)
	a.stop(t)
	b.stop(t)
	after := e.starts(rec)
	// The first start after the restart: had the missed ticks fired one by one, it would be the
	// tick right after the last one before the stop.
	var firstAfter time.Time
	for tick, n := range after {
		if n != 1 {
			t.Errorf("tick %s fired %d times", tick, n)
		}
		if tick.After(last[len(last)-1]) && (firstAfter.IsZero() || tick.Before(firstAfter)) {
			firstAfter = tick
		}
	}
	since := map[time.Time]int{}
	for tick, n := range after {
		if !tick.Before(firstAfter) {
			since[tick] = n
		}
	}
	onceEach(t, since) // from then on, every tick once
	// The one start for the missed ticks is the newest tick at the restart.
	if gap := firstAfter.Sub(last[len(last)-1]); gap < 5*time.Second || firstAfter.After(restarted.Add(5*time.Second)) {
		t.Fatalf("last tick before the stop %s (stopped %s), first after %s (restarted %s)", last[len(last)-1], stoppedAt, firstAfter, restarted)
	}
}

// kill -9 of schedule processes mid-loop loses no tick and fires none twice: first random
// kills of one of the two processes, then a process killed while its claims cannot be
// enqueued (the task stream is unwritable for a moment), whose pending claims the survivor
// completes after the claim grace.
func TestE2EScheduleKill9LosesNoTickAndFiresNoneTwice(t *testing.T) {
	t.Parallel()
	e := newScheduleE2E(t, nil)
	e.publishFile("default", "hello.json")
	rec := e.addSchedule("k9", "--cron", "* * * * * *", "--flow", "hello")
	a, b := e.spawn("schedule", map[string]string{"PLAITA_INSTANCE_ID": "k9-a"}), e.spawn("schedule", map[string]string{"PLAITA_INSTANCE_ID": "k9-b"})
	e.waitStarts(rec, 1, 60*time.Second, a, b)
	for i := range 6 {
		a.kill9(t)
		time.Sleep(time.Duration(150+i*170) * time.Millisecond) // kills land at varying points of the loop
		a = e.spawn("schedule", map[string]string{"PLAITA_INSTANCE_ID": "k9-a"})
		time.Sleep(700 * time.Millisecond)
	}
	// Make the stream unwritable: every claim stays pending (the enqueue fails).
	stream := config.QueueName.In(e.cfg)
	saved, err := e.c.Do(e.ctx, e.c.B().Dump().Key(stream).Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.Do(e.ctx, e.c.B().Del().Key(stream).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Do(e.ctx, e.c.B().Set().Key(stream).Value("not a stream").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(e.showSchedule("default", "k9").Pending) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no claims left pending while the stream is unwritable\n%s", logs([]*proc{a, b}))
		}
		time.Sleep(100 * time.Millisecond)
	}
	a.kill9(t)
	if err := e.c.Do(e.ctx, e.c.B().Del().Key(stream).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Do(e.ctx, e.c.B().Restore().Key(stream).Ttl(0).SerializedValue(saved).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	// The survivor completes every pending claim, its own and the dead one's, after the grace.
	deadline = time.Now().Add(store.DefaultClaimGrace + 60*time.Second)
	for {
		cur := e.showSchedule("default", "k9")
		if len(cur.Pending) == 0 && cur.LastFire != nil && cur.LastFire.Tick.After(time.Now().Add(-5*time.Second)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pending claims never completed: %+v\n%s", cur.Pending, logs([]*proc{b}))
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.stop(t)
	got := e.starts(rec)
	ts := onceEach(t, got)
	if t.Failed() {
		t.Fatalf("starts per tick %v\n%s", got, logs([]*proc{b}))
	}
	if len(ts) < 10 {
		t.Fatalf("%d ticks", len(ts))
	}
	if !strings.Contains(b.stderr.String(), `"event":"schedule.recovered"`) {
		t.Errorf("the survivor never recovered a claim:\n%s", b.stderr.String())
	}
}

// The testdata flow scheduled-report runs from a schedule, in a tenant, with the schedule's
// input: the worker runs its start to the delay node (a delay-queue entry for run_at), and a
// continue completes it with the report named in the input.
func TestE2EScheduledReportRunsFromASchedule(t *testing.T) {
	t.Parallel()
	e := newScheduleE2E(t, nil)
	e.publishFile("acme", "scheduled-report.json")
	e.start("worker", nil)
	s := e.spawn("schedule", nil)
	e.addSchedule("weekly-report", "--tenant", "acme", "--cron", "* * * * * *", "--flow", "scheduled-report",
		"--input", `{"run_at":"2020-01-06T09:00:00Z","report":"weekly-sales"}`)
	var fired store.ScheduleRecord
	deadline := time.Now().Add(60 * time.Second)
	for fired = e.showSchedule("acme", "weekly-report"); fired.LastFire == nil; fired = e.showSchedule("acme", "weekly-report") {
		if time.Now().After(deadline) {
			t.Fatalf("the schedule never fired\n%s", s.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.cli("schedule", "disable", "weekly-report", "--tenant", "acme")
	s.stop(t)
	id := fired.LastFire.ExecutionID
	env := maps.Clone(e.env)
	deadline = time.Now().Add(60 * time.Second)
	var st state.Execution
	for {
		r := run(t, env, "execution", "show", id, "--tenant", "acme", "--json", "--quiet")
		if r.code == 0 {
			if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
				t.Fatal(err)
			}
			if st.Status == state.Suspended {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %s never suspended: %s\n%s", id, r.stdout, r.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st.TenantID != "acme" || st.FlowVersion != "1" || st.CurrentNode != "wait_until" || st.Suspend == nil || st.Suspend.Due == nil ||
		!st.Suspend.Due.Equal(time.Date(2020, 1, 6, 9, 0, 0, 0, time.UTC)) {
		t.Fatalf("suspended state %+v", st)
	}
	members, err := e.c.Do(e.ctx, e.c.B().Zrange().Key("plaita:delay:queue:scheduled").Min("0").Max("-1").Build()).AsStrSlice()
	if err != nil || !slices.ContainsFunc(members, func(m string) bool { return strings.Contains(m, id) }) {
		t.Fatalf("no delay-queue entry for %s: %v %v", id, members, err)
	}
	e.cli("execution", "resume", id, "--tenant", "acme", "--type", "continue")
	deadline = time.Now().Add(60 * time.Second)
	for {
		r := run(t, env, "execution", "show", id, "--tenant", "acme", "--json", "--quiet")
		if r.code == 0 && json.Unmarshal([]byte(r.stdout), &st) == nil && st.Status.Terminal() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %s never finished: %s", id, r.stdout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, _ := json.Marshal(st.Output)
	if st.Status != state.Completed || !strings.Contains(string(out), `"report":"weekly-sales"`) || !strings.Contains(string(out), "2020-01-06T09:00:00Z") {
		t.Fatalf("finished %s with output %s (%+v)", st.Status, out, st.Error)
	}
}

// PLAITA_CHECK_INTERVAL=0 (and negative, and not a number) is refused by the preflight of every
// role that reads it — the schedule role, dev, and the schedule subcommands — before any
// connection.
func TestE2ECheckIntervalZeroIsRejected(t *testing.T) {
	t.Parallel()
	tr := newTrap(t)
	cases := [][]string{{"schedule"}, {"dev"}, {"schedule", "list"}, {"schedule", "add", "x", "--cron", "* * * * *", "--flow", "f"}}
	for _, bad := range []string{"0", "-1", "abc", ""} {
		for _, args := range cases {
			r := run(t, map[string]string{"PLAITA_REDIS_URL": tr.url(), "PLAITA_CHECK_INTERVAL": bad}, args...)
			if r.code != 2 || !strings.Contains(r.stderr, "PLAITA_CHECK_INTERVAL: ") || !strings.Contains(r.stderr, "configuration rejected") {
				t.Errorf("PLAITA_CHECK_INTERVAL=%q, plaita %s: exit %d\n%s", bad, strings.Join(args, " "), r.code, r.stderr)
			}
		}
	}
	r := run(t, map[string]string{"PLAITA_CHECK_INTERVAL": "0"}, "doctor", "--role", "schedule")
	if r.code != 2 || !strings.Contains(r.stdout+r.stderr, "PLAITA_CHECK_INTERVAL") {
		t.Errorf("doctor --role schedule: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The worker does not read it.
	if r := run(t, map[string]string{"PLAITA_CHECK_INTERVAL": "0"}, "doctor", "--role", "worker"); r.code != 0 {
		t.Errorf("doctor --role worker: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if n := tr.connections(); n != 0 {
		t.Fatalf("%d connection(s) made before the preflight passed", n)
	}
}

// The editing subcommands: their output (text and --json), their exit statuses, and what they
// refuse.
func TestE2EScheduleCLI(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()))
	env := s.env
	ok := func(args ...string) string {
		t.Helper()
		r := run(t, env, append(args, "--quiet")...)
		if r.code != 0 {
			t.Fatalf("plaita %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		return r.stdout
	}
	fails := func(code int, want string, args ...string) {
		t.Helper()
		r := run(t, env, append(args, "--quiet")...)
		if r.code != code || !strings.Contains(r.stderr, want) {
			t.Errorf("plaita %s: exit %d (want %d), stderr %q (want %q)", strings.Join(args, " "), r.code, code, r.stderr, want)
		}
	}
	help := run(t, nil, "schedule", "--help")
	for _, want := range []string{"run the schedule role", "add", "list", "enable", "disable", "delete", "PLAITA_CHECK_INTERVAL"} {
		if help.code != 0 || !strings.Contains(help.stdout, want) {
			t.Errorf("schedule --help lacks %q:\n%s", want, help.stdout)
		}
	}
	r := run(t, env, "schedule", "add", "nightly", "--cron", "30 2 * * *", "--tz", "Europe/Paris", "--flow", "report")
	if r.code != 0 || !strings.Contains(r.stdout, `schedule nightly created in tenant default: cron "30 2 * * *" (Europe/Paris)`) ||
		!strings.Contains(r.stdout, "next tick: ") || !strings.Contains(r.stderr, "not published") {
		t.Fatalf("add: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var added struct {
		store.ScheduleRecord
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(ok("schedule", "add", "--cron", "*/10 * * * * *", "--flow", "report", "--version", "3",
		"--input", `{"a":[1,2]}`, "--disabled", "--tenant", "acme", "--json")), &added); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(added.ID, "sch_") || added.Enabled || added.TenantID != "acme" || added.FlowVersion != "3" ||
		compactJSON(t, added.Input) != `{"a":[1,2]}` || !added.Next.IsZero() || len(added.Warnings) != 1 {
		t.Fatalf("add --json %+v", added)
	}
	fails(1, "already exists", "schedule", "add", "nightly", "--cron", "* * * * *", "--flow", "report")
	fails(2, "@every is not supported", "schedule", "add", "x", "--cron", "@every 5s", "--flow", "report")
	fails(2, "not an IANA zone", "schedule", "add", "x", "--cron", "* * * * *", "--tz", "Mars/Base", "--flow", "report")
	fails(2, "expected 5 to 6 fields", "schedule", "add", "x", "--cron", "* * *", "--flow", "report")
	fails(2, "--cron and --flow are required", "schedule", "add", "x", "--flow", "report")
	fails(2, "--input", "schedule", "add", "x", "--cron", "* * * * *", "--flow", "report", "--input", "{nope")
	fails(2, "invalid key name", "schedule", "add", "a:b", "--cron", "* * * * *", "--flow", "report")
	fails(2, "--flow", "schedule", "add", "x", "--cron", "* * * * *", "--flow", "a b")
	fails(2, "--tenant", "schedule", "list", "--tenant", "Bad Tenant")
	fails(2, `unknown subcommand "nosuch"`, "schedule", "nosuch")
	fails(1, "schedule not found", "schedule", "show", "missing")
	fails(1, "no schedule missing", "schedule", "delete", "missing")
	fails(2, "name one schedule", "schedule", "enable")
	fails(2, "name one schedule", "schedule", "run")
	fails(1, "schedule not found", "schedule", "run", "missing")
	fails(1, "report", "schedule", "run", "nightly") // its flow is not published: refused, nothing started
	ok("flow", "publish", repoFlow(t, "hello.json"))
	ok("schedule", "add", "hourly-hello", "--cron", "@hourly", "--flow", "hello", "--disabled")
	// A start checks the flow with the node types a worker sets up: no docker daemon here.
	runEnv := maps.Clone(env)
	runEnv["PLAITA_CODE_BACKEND"] = "subprocess"
	r = run(t, runEnv, "schedule", "run", "hourly-hello", "--json", "--quiet")
	var ran map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &ran); r.code != 0 || err != nil ||
		!strings.HasPrefix(fmt.Sprint(ran["execution_id"]), "ex_") || ran["flow_id"] != "hello" {
		t.Fatalf("run --json of a disabled schedule: exit %d %v %v\n%s", r.code, ran, err, r.stderr)
	}
	ok("schedule", "delete", "hourly-hello")

	list := ok("schedule", "list")
	if !strings.Contains(list, "ID") || !strings.Contains(list, "nightly  true") || !strings.Contains(list, "Europe/Paris") {
		t.Fatalf("list:\n%s", list)
	}
	var page struct {
		TenantID string                 `json:"tenant_id"`
		Items    []store.ScheduleRecord `json:"items"`
		Bad      []any                  `json:"bad"`
	}
	if err := json.Unmarshal([]byte(ok("schedule", "list", "--tenant", "acme", "--json")), &page); err != nil ||
		page.TenantID != "acme" || len(page.Items) != 1 || page.Items[0].ID != added.ID || page.Bad == nil {
		t.Fatalf("list --json %+v %v", page, err)
	}
	if out := ok("schedule", "enable", added.ID, "--tenant", "acme"); !strings.Contains(out, "enabled (next tick ") {
		t.Fatalf("enable: %s", out)
	}
	if out := ok("schedule", "enable", added.ID, "--tenant", "acme"); !strings.Contains(out, "already enabled") {
		t.Fatalf("enable twice: %s", out)
	}
	var toggled map[string]any
	if err := json.Unmarshal([]byte(ok("schedule", "disable", added.ID, "--tenant", "acme", "--json")), &toggled); err != nil ||
		toggled["changed"] != true || toggled["enabled"] != false {
		t.Fatalf("disable --json %v %v", toggled, err)
	}
	if out := ok("schedule", "show", "nightly"); !strings.Contains(out, "cron:      30 2 * * * (Europe/Paris)") || !strings.Contains(out, "next tick: ") {
		t.Fatalf("show:\n%s", out)
	}
	var del map[string]any
	if err := json.Unmarshal([]byte(ok("schedule", "delete", "nightly", "--json")), &del); err != nil || del["deleted"] != true {
		t.Fatalf("delete --json %v %v", del, err)
	}
	if out := ok("schedule", "list"); !strings.Contains(out, "no schedules in tenant default") {
		t.Fatalf("list after delete: %s", out)
	}
	// An unreadable record is listed as such and reported, never silently dropped.
	c := s.c
	k, _ := keys.MustFor("", "acme").Schedule(added.ID)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Do(ctx, c.B().Hset().Key(k).FieldValue().FieldValue("def", "{").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	r = run(t, env, "schedule", "list", "--tenant", "acme", "--json")
	if r.code != 0 || !strings.Contains(r.stdout, `"error": "invalid schedule`) || !strings.Contains(r.stderr, "schedule.bad_record") {
		t.Fatalf("list with a bad record: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
