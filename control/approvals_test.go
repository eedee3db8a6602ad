package control

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/store"
	"plaita/store/keys"
)

// The pending approvals of a tenant: only executions that still wait at the recorded approval
// are listed (stale members are pruned, another tenant's are not seen), pages are exact, and
// an answer is a checked resume that carries who gave it.
func TestApprovalsListAndAnswer(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pub, err := f.p.PublishFlow(ctx, "acme", []byte(askFlow), "")
	if err != nil {
		t.Fatal(err)
	}
	ts, err := f.store.Tenant("acme")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	wait := func(id string, since time.Time, status state.Status) {
		st := &state.Execution{ExecutionID: id, TenantID: "acme", FlowID: "ask", FlowVersion: "1", FlowHash: pub.Flow.Hash,
			FlowHashAlgo: pub.Flow.HashAlgo, Status: status, CurrentNode: "ask", Context: map[string]any{}, StartTime: since, LastUpdate: since}
		if status == state.Suspended {
			st.Suspend = &state.Suspend{Kind: state.SuspendApproval, Node: "ask", Since: since, Message: "ok?"}
		}
		f.save(st)
		if err := ts.PutApproval(ctx, store.Approval{ExecutionID: id, FlowID: "ask", FlowVersion: "1", Node: "ask", Message: "ok?", Since: since}, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	for i, id := range []string{"ex_a1", "ex_a2", "ex_a3", "ex_a4"} {
		wait(id, now.Add(time.Duration(i)*time.Second), state.Suspended)
	}
	wait("ex_gone", now.Add(5*time.Second), state.Completed) // answered elsewhere: its member is stale
	// Suspended again at the approval after its record was written: another suspension.
	wait("ex_again", now.Add(6*time.Second), state.Suspended)
	again := &state.Execution{ExecutionID: "ex_again", TenantID: "acme", FlowID: "ask", FlowVersion: "1", FlowHash: pub.Flow.Hash,
		FlowHashAlgo: pub.Flow.HashAlgo, Status: state.Suspended, CurrentNode: "ask", Context: map[string]any{}, StartTime: now, LastUpdate: now,
		Suspend: &state.Suspend{Kind: state.SuspendApproval, Node: "ask", Since: now.Add(7 * time.Second)}}
	f.save(again)

	page, err := f.p.Approvals(ctx, "acme", "", 2)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		for _, it := range page.Items {
			got = append(got, it.ExecutionID)
		}
		if page.NextCursor == "" {
			break
		}
		if page, err = f.p.Approvals(ctx, "acme", page.NextCursor, 2); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"ex_a4", "ex_a3", "ex_a2", "ex_a1"}; !slices.Equal(got, want) {
		t.Fatalf("pending approvals %v, want %v", got, want)
	}
	if n, err := f.c.Do(ctx, f.c.B().Zcard().Key(keys.MustFor(f.root, "acme").ApprovalIndex()).Build()).AsInt64(); err != nil || n != 4 {
		t.Fatalf("the index after the listing holds %d members (%v), want the 4 pending", n, err)
	}
	if page, err := f.p.Approvals(ctx, "", "", 10); err != nil || len(page.Items) != 0 {
		t.Fatalf("the default tenant sees %+v %v", page.Items, err)
	}
	_, err = f.p.Approvals(ctx, "acme", "not-a-cursor", 10)
	refusal(t, "bad cursor", err, Invalid, "invalid_cursor")

	_, err = f.p.AnswerApproval(ctx, Answer{Tenant: "acme", ID: "ex_a1", Approved: true})
	refusal(t, "an answer without its approver", err, Invalid, "invalid_answer")
	_, err = f.p.AnswerApproval(ctx, Answer{Tenant: "acme", ID: "ex_gone", Approved: true, By: "lee"})
	refusal(t, "an answer to a completed execution", err, Conflict, "terminal")
	_, err = f.p.AnswerApproval(ctx, Answer{Tenant: "", ID: "ex_a1", Approved: true, By: "lee"})
	refusal(t, "an answer from another tenant", err, NotFound, "execution_not_found")
	done, err := f.p.AnswerApproval(ctx, Answer{Tenant: "acme", ID: "ex_a1", Approved: false, Comment: "too much", By: "lee"})
	if err != nil || !done.Enqueued || done.ResumeType != engine.ResumeApproval {
		t.Fatalf("answer: %+v %v", done, err)
	}
	ds, err := f.q.Read(ctx, "c", 10, 0)
	if err != nil || len(ds) != 1 {
		t.Fatalf("enqueued: %+v %v", ds, err)
	}
	var data map[string]any
	if err := json.Unmarshal(ds[0].Envelope.ResumeData, &data); err != nil || data["by"] != "lee" || data["approved"] != false || data["comment"] != "too much" {
		t.Fatalf("the answer's data: %s %v", ds[0].Envelope.ResumeData, err)
	}
}
