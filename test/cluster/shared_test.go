package cluster

import (
	"encoding/json"
	"plaita/config"
	"plaita/engine/state"
	"plaita/roles/schedule"
	"plaita/store"
	"time"
)

const shortFlow = `{"id":"short","start":"a","nodes":[
	{"id":"a","type":"set","params":{"vars":{"x":"1"}},"next":"b"},
	{"id":"b","type":"set","params":{"vars":{"y":"{{ VARS.x }}2"}},"next":"done"},
	{"id":"done","type":"end","params":{"output":"{{ VARS.y }}"}}]}`

func (e *stack) addSchedule(args ...string) store.ScheduleRecord {
	e.t.Helper()
	out := e.cli(append([]string{"schedule", "add"}, append(args, "--json")...)...)
	var rec store.ScheduleRecord
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		e.t.Fatalf("schedule add --json does not parse: %v\n%s", err, out)
	}
	return rec
}

func (e *stack) showSchedule(tenant, id string) store.ScheduleRecord {
	e.t.Helper()
	out := e.cli("schedule", "show", id, "--tenant", tenant, "--json")
	var rec store.ScheduleRecord
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		e.t.Fatalf("schedule show --json does not parse: %v\n%s", err, out)
	}
	return rec
}

// ticks maps the execution ids of rec's starts to their ticks, for every whole second from its
// creation to a minute from now.
func ticks(rec store.ScheduleRecord) map[string]time.Time {
	out := map[string]time.Time{}
	for t := rec.CreatedAt.Truncate(time.Second); t.Before(time.Now().Add(time.Minute)); t = t.Add(time.Second) {
		out[schedule.ExecutionID(rec.TenantID, rec.ID, rec.CreatedAt, t)] = t
	}
	return out
}

// timelineAt is the time of the last timeline entry with event ev (zero when none).
func timelineAt(st state.Execution, ev string) time.Time {
	var at time.Time
	for _, e := range st.Timeline {
		if e.Event == ev {
			at = e.Time.Time()
		}
	}
	return at
}

// dlqEntries reads the whole dead-letter stream as field maps.
func (s *stack) dlqEntries() []map[string]string {
	s.t.Helper()
	rs, err := s.c.Do(s.ctx, s.c.B().Xrange().Key(config.DLQKey.In(s.cfg)).Start("-").End("+").Build()).AsXRange()
	if err != nil {
		s.t.Fatalf("xrange dlq: %v", err)
	}
	out := make([]map[string]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.FieldValues)
	}
	return out
}
