package ui

import (
	"encoding/json"
	"strings"
	"testing"

	"plaita/control"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/store"
)

// TestCollapseDecisions: a loop's same decision at consecutive passes is one row with its
// count; a different one in between starts a new row.
func TestCollapseDecisions(t *testing.T) {
	d := func(why, to string, seq int) engine.Branch {
		return engine.Branch{Node: "check", Why: why, To: to, Seq: seq, Time: state.Timestamp("t" + string(rune('0'+seq)))}
	}
	rows := collapse([]engine.Branch{d("i < 3 is true", "inc", 1), d("i < 3 is true", "inc", 2), d("i < 3 is true", "inc", 3),
		d("i < 3 is false", "done", 4)})
	if len(rows) != 2 || rows[0].Times != 3 || rows[0].Last != "t3" || rows[1].Times != 1 || rows[1].To != "done" {
		t.Fatalf("rows %+v", rows)
	}
}

// TestTimelineBefore: pages of timelinePage entries, newest first, each naming where the next
// older page starts, the last naming none.
func TestTimelineBefore(t *testing.T) {
	st := &state.Execution{TimelineDropped: 10}
	for seq := 11; seq <= 130; seq++ {
		st.Timeline = append(st.Timeline, state.TimelineEntry{Seq: seq})
	}
	page, older := timelineBefore(st, 0)
	if len(page) != timelinePage || page[0].Seq != 130 || page[len(page)-1].Seq != 81 || older != 81 {
		t.Fatalf("first page %d..%d, older %d", page[0].Seq, page[len(page)-1].Seq, older)
	}
	page, older = timelineBefore(st, older)
	if len(page) != timelinePage || page[0].Seq != 80 || older != 31 {
		t.Fatalf("second page from %d, older %d", page[0].Seq, older)
	}
	page, older = timelineBefore(st, older)
	if len(page) != 20 || page[0].Seq != 30 || page[19].Seq != 11 || older != 0 {
		t.Fatalf("last page %d entries from %d, older %d", len(page), page[0].Seq, older)
	}
}

// The buttons are the accepted resumes, in the hints' order: an approval has its own form, the
// event its pre-filled form, a resume past a flow-hash mismatch is left to the CLI, a note is
// no button; the destructive ones ask first.
func TestActionsAreTheAcceptedResumes(t *testing.T) {
	hints := []control.Hint{
		{Label: "approve with", Type: state.ResumeApproval, Data: `{"approved": true}`},
		{Label: "deliver the event with", Type: state.ResumeEvent, Data: `{"type": "paid", "order_id": "o-2"}`},
		{Label: "time it out with", Type: state.ResumeTimeout},
		{Label: "continue with", Type: state.ResumeContinue, AllowFlowHashChange: true},
		{Note: []string{"no retry: the node failed for good"}},
		{Label: "cancel with", Type: state.ResumeCancel},
	}
	got, event := actionsOf("ex_1", hints)
	if event != `{"type": "paid", "order_id": "o-2"}` {
		t.Errorf("the event %q", event)
	}
	var do []string
	for _, a := range got {
		do = append(do, a.Do)
		if a.Danger != (a.Confirm != "") {
			t.Errorf("%s: danger %v, confirm %q", a.Do, a.Danger, a.Confirm)
		}
	}
	if strings.Join(do, ",") != "timeout,cancel" {
		t.Errorf("buttons %v", do)
	}
	if got, event := actionsOf("ex_1", nil); len(got) != 0 || event != "" {
		t.Errorf("no hints: %v %q", got, event)
	}
}

// "Edit as a new version" moves the version past every published one and changes nothing
// else of the text.
func TestNextVersion(t *testing.T) {
	vs := func(v ...string) []control.VersionShown {
		var out []control.VersionShown
		for _, x := range v {
			out = append(out, control.VersionShown{FlowVersion: store.FlowVersion{Version: x}})
		}
		return out
	}
	for _, c := range []struct {
		def, want string
		published []control.VersionShown
	}{
		{`{"id": "a", "version": "2", "nodes": [{"params": {"version": "2"}}]}`, `{"id": "a", "version": "4", "nodes": [{"params": {"version": "2"}}]}`, vs("2", "3", "1")},
		{"{\n  \"version\":\"beta\"\n}", "{\n  \"version\":\"beta-3\"\n}", vs("beta", "beta-2")},
		{`{"id": "a"}`, `{"id": "a"}`, vs("1")},
		{`{"version": 2}`, `{"version": 2}`, vs("2")},
		{`[1]`, `[1]`, nil},
	} {
		if got := string(nextVersion(json.RawMessage(c.def), c.published)); got != c.want {
			t.Errorf("nextVersion(%s) = %s, want %s", c.def, got, c.want)
		}
	}
}
