package queue

import (
	"encoding/json"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/internal/redistest"
)

// The member is byte for byte the format of docs/wakeups.md; the score is the due time in ms.
func TestDelayScheduleMemberAndScore(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	root := redistest.Root(t, c)
	d, err := NewDelay(c, root+":delay:queue")
	if err != nil {
		t.Fatal(err)
	}
	if d.ScheduledKey() != root+":delay:queue:scheduled" || DelayScheduledKey("plaita:delay:queue") != "plaita:delay:queue:scheduled" {
		t.Fatalf("scheduled key %q", d.ScheduledKey())
	}
	ctx := testCtx(t)
	due := time.Date(2026, 11, 29, 14, 0, 0, 500000000, time.FixedZone("CET", 3600))
	e := DelayEntry{ExecutionID: "ex_1", TenantID: "default", FlowID: "reminder", FlowVersion: "1",
		ResumeType: state.ResumeContinue, Node: "wait_an_hour", Due: due}
	for range 2 { // idempotent: one member
		if err := d.Schedule(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	e2 := e
	e2.ResumeType, e2.Node, e2.Due = state.ResumeTimeout, "wait_paid", due.Add(time.Hour)
	if err := d.Schedule(ctx, e2); err != nil {
		t.Fatal(err)
	}
	res, err := c.Do(ctx, c.B().Zrange().Key(d.ScheduledKey()).Min("0").Max("-1").Withscores().Build()).AsZScores()
	if err != nil || len(res) != 2 {
		t.Fatalf("scheduled: %v %v", res, err)
	}
	const want = `{"execution_id":"ex_1","tenant_id":"default","flow_id":"reminder","flow_version":"1",` +
		`"resume_type":"continue","node":"wait_an_hour","due":"2026-11-29T13:00:00.5Z"}`
	if res[0].Member != want || int64(res[0].Score) != due.UnixMilli() {
		t.Errorf("member %s score %v\nwant   %s score %d", res[0].Member, int64(res[0].Score), want, due.UnixMilli())
	}
	var back DelayEntry
	if err := json.Unmarshal([]byte(res[1].Member), &back); err != nil || back.ResumeType != state.ResumeTimeout ||
		!back.Due.Equal(e2.Due) || int64(res[1].Score) != e2.Due.UnixMilli() {
		t.Errorf("timeout entry %+v (score %v) %v", back, res[1].Score, err)
	}
}

func TestDelayRefusesBadInput(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	root := redistest.Root(t, c)
	if _, err := NewDelay(c, ""); err == nil {
		t.Error("an empty delay queue name must be refused")
	}
	if _, err := NewDelay(nil, "x"); err == nil {
		t.Error("a nil client must be refused")
	}
	d, err := NewDelay(c, root+":delay:queue")
	if err != nil {
		t.Fatal(err)
	}
	ok := DelayEntry{ExecutionID: "ex_1", ResumeType: state.ResumeContinue, Due: time.Now()}
	for name, mod := range map[string]func(*DelayEntry){
		"no id":          func(e *DelayEntry) { e.ExecutionID = "" },
		"no resume type": func(e *DelayEntry) { e.ResumeType = "" },
		"no due time":    func(e *DelayEntry) { e.Due = time.Time{} },
	} {
		e := ok
		mod(&e)
		if err := d.Schedule(testCtx(t), e); err == nil {
			t.Errorf("%s: scheduled", name)
		}
	}
	if n, err := c.Do(testCtx(t), c.B().Exists().Key(d.ScheduledKey()).Build()).AsInt64(); err != nil || n != 0 {
		t.Errorf("refused entries wrote the queue: %d %v", n, err)
	}
}
