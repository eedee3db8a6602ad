package sqlite

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"plaita/engine"
	"plaita/store"
)

func TestJobs(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := ctx(t)
	j := must[Job](t)(f.CreateJob(c, NewJob{Tenant: "acme", Kind: "executions.cancel", Filter: json.RawMessage(`{"status": "suspended"}`), Total: 3, CreatedBy: "ann"}))
	if j.Status != JobPending || j.Total != 3 || string(j.Filter) != `{"status":"suspended"}` || !strings.HasPrefix(j.ID, "job_") {
		t.Fatalf("created: %+v", j)
	}
	j = must[Job](t)(f.UpdateJob(c, "acme", j.ID, JobUpdate{Status: JobRunning, AddSucceeded: 1}))
	j = must[Job](t)(f.UpdateJob(c, "acme", j.ID, JobUpdate{AddSucceeded: 1, AddFailed: 1, Failures: []JobFailure{{Item: "ex_3", Error: "lease held"}}}))
	if j.Status != JobRunning || j.Succeeded != 2 || j.Failed != 1 || len(j.Failures) != 1 || j.Failures[0].Item != "ex_3" {
		t.Fatalf("progress: %+v", j)
	}
	total := 4
	j = must[Job](t)(f.UpdateJob(c, "acme", j.ID, JobUpdate{Total: &total, Status: JobCompleted}))
	if got := must[Job](t)(f.Job(c, "acme", j.ID)); got.Status != JobCompleted || got.Total != 4 || len(got.Failures) != 1 {
		t.Errorf("read back: %+v", got)
	}
	_, err := f.UpdateJob(c, "acme", j.ID, JobUpdate{AddSucceeded: 1})
	wantErr(t, "update a finished job", err, ErrPrecondition, ErrJobFinished)
	// Another tenant sees no such job.
	_, err = f.Job(c, "other", j.ID)
	wantErr(t, "another tenant's job", err, store.ErrNotFound, ErrJobNotFound)
	_, err = f.UpdateJob(c, "other", j.ID, JobUpdate{})
	wantErr(t, "update another tenant's job", err, store.ErrNotFound, ErrJobNotFound)
	// Failures are kept up to the bound and counted beyond it.
	k := must[Job](t)(f.CreateJob(c, NewJob{Tenant: "acme", Kind: "executions.delete", DryRun: true}))
	many := make([]JobFailure, MaxJobFailures+5)
	for i := range many {
		many[i] = JobFailure{Item: fmt.Sprintf("ex_%d", i), Error: strings.Repeat("e", 5000)}
	}
	k = must[Job](t)(f.UpdateJob(c, "acme", k.ID, JobUpdate{AddFailed: len(many), Failures: many}))
	if len(k.Failures) != MaxJobFailures || k.FailuresDropped != 5 || len(k.Failures[0].Error) != maxFailureError || !k.DryRun || string(k.Filter) != "{}" {
		t.Errorf("bounded failures: %d kept, %d dropped", len(k.Failures), k.FailuresDropped)
	}
	for name, bad := range map[string]NewJob{
		"kind":   {Tenant: "acme", Kind: "Bulk Cancel"},
		"filter": {Tenant: "acme", Kind: "x", Filter: json.RawMessage(`[1]`)},
		"total":  {Tenant: "acme", Kind: "x", Total: -1},
		"tenant": {Tenant: "A", Kind: "x"},
	} {
		_, err := f.CreateJob(c, bad)
		wantErr(t, name, err, store.ErrInvalid, nil)
	}
	_, err = f.UpdateJob(c, "acme", k.ID, JobUpdate{AddFailed: -1})
	wantErr(t, "a negative count", err, store.ErrInvalid, nil)
	_, err = f.UpdateJob(c, "acme", k.ID, JobUpdate{Status: "done"})
	wantErr(t, "an unknown status", err, store.ErrInvalid, nil)

	// Newest first, paged, without failures.
	f.clock.Advance(time.Second)
	newest := must[Job](t)(f.CreateJob(c, NewJob{Tenant: "acme", Kind: "executions.resume"}))
	p := must[Page[Job]](t)(f.ListJobs(c, "acme", ListOptions{Limit: 2}))
	if len(p.Items) != 2 || p.Items[0].ID != newest.ID || p.Next == "" {
		t.Fatalf("jobs page 1: %+v", p)
	}
	for _, it := range p.Items {
		if len(it.Failures) != 0 {
			t.Errorf("a listed job carries its failures: %s", it.ID)
		}
	}
	p = must[Page[Job]](t)(f.ListJobs(c, "acme", ListOptions{Limit: 2, Cursor: p.Next}))
	if len(p.Items) != 1 || p.Next != "" {
		t.Fatalf("jobs page 2: %+v", p)
	}
}

func TestDrafts(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := ctx(t)
	must[Tenant](t)(f.CreateTenant(c, NewTenant{Slug: "acme"}))
	def := json.RawMessage(`{"id": "order",  "nodes": []}`)
	d := must[Draft](t)(f.SaveDraft(c, DraftSave{Tenant: "acme", FlowID: "order", Definition: def, By: "ann"}))
	if d.Revision != 1 || string(d.Definition) != string(def) || d.UpdatedBy != "ann" {
		t.Fatalf("saved: %+v", d)
	}
	f.clock.Advance(time.Second)
	d = must[Draft](t)(f.SaveDraft(c, DraftSave{Tenant: "acme", FlowID: "order", Definition: json.RawMessage(`{"id":"order","v":2}`), By: "bob", IfRevision: 1}))
	if d.Revision != 2 || d.UpdatedBy != "bob" || !d.UpdatedAt.After(d.CreatedAt) {
		t.Fatalf("saved again: %+v", d)
	}
	// An editor that started from revision 1 is refused: someone saved in between.
	_, err := f.SaveDraft(c, DraftSave{Tenant: "acme", FlowID: "order", Definition: def, By: "ann", IfRevision: 1})
	wantErr(t, "a stale revision", err, ErrPrecondition, ErrDraftChanged)
	_, err = f.SaveDraft(c, DraftSave{Tenant: "acme", FlowID: "new", Definition: def, By: "ann", IfRevision: 3})
	wantErr(t, "a revision of a draft that does not exist", err, ErrPrecondition, ErrDraftChanged)
	_, err = f.SaveDraft(c, DraftSave{Tenant: "acme", FlowID: "order", Definition: def, By: "ann", Create: true})
	wantErr(t, "a creation of a draft that exists", err, ErrExists, ErrDraftExists)
	if got := must[Draft](t)(f.Draft(c, "acme", "order")); string(got.Definition) != `{"id":"order","v":2}` {
		t.Errorf("a refused save changed the draft: %s", got.Definition)
	}
	for name, bad := range map[string]DraftSave{
		"not JSON":  {Tenant: "acme", FlowID: "x", Definition: json.RawMessage(`{nope`)},
		"empty":     {Tenant: "acme", FlowID: "x"},
		"too large": {Tenant: "acme", FlowID: "x", Definition: json.RawMessage(`"` + strings.Repeat("x", MaxDefinitionBytes) + `"`)},
		"flow id":   {Tenant: "acme", FlowID: "a:b", Definition: def},
	} {
		_, err := f.SaveDraft(c, bad)
		wantErr(t, name, err, store.ErrInvalid, nil)
	}
	_, err = f.SaveDraft(c, DraftSave{Tenant: "nowhere", FlowID: "x", Definition: def})
	wantErr(t, "an unknown tenant", err, store.ErrNotFound, ErrTenantNotFound)
	_, err = f.Draft(c, "default", "order")
	wantErr(t, "another tenant's draft", err, store.ErrNotFound, ErrDraftNotFound)

	for _, id := range []string{"b", "a", "c"} {
		must[Draft](t)(f.SaveDraft(c, DraftSave{Tenant: "acme", FlowID: id, Definition: def, By: "ann"}))
	}
	p := must[Page[Draft]](t)(f.ListDrafts(c, "acme", ListOptions{Limit: 3}))
	if len(p.Items) != 3 || p.Items[0].FlowID != "a" || p.Items[0].Definition != nil || p.Next == "" {
		t.Fatalf("drafts page 1: %+v", p)
	}
	p = must[Page[Draft]](t)(f.ListDrafts(c, "acme", ListOptions{Cursor: p.Next}))
	if len(p.Items) != 1 || p.Items[0].FlowID != "order" {
		t.Fatalf("drafts page 2: %+v", p)
	}
	if err := f.DeleteDraft(c, "acme", "order"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "delete again", f.DeleteDraft(c, "acme", "order"), store.ErrNotFound, ErrDraftNotFound)
	if MaxDefinitionBytes != engine.MaxFlowBytes {
		t.Errorf("MaxDefinitionBytes %d, engine.MaxFlowBytes %d", MaxDefinitionBytes, engine.MaxFlowBytes)
	}
}

func TestFlowVersions(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := ctx(t)
	must[Tenant](t)(f.CreateTenant(c, NewTenant{Slug: "acme"}))
	v1 := FlowVersion{Tenant: "acme", FlowID: "order", Version: "1", Definition: json.RawMessage(`{"id":"order"}`), Hash: "h1", HashAlgo: "fh2", PublishedBy: "ann"}
	rec, dup, err := f.RecordVersion(c, v1)
	if err != nil || dup || rec.Seq != 1 || !rec.PublishedAt.Equal(f.clock.Now()) {
		t.Fatalf("recorded: %+v %v %v", rec, dup, err)
	}
	// The same version again is a duplicate; with another definition it is refused.
	f.clock.Advance(time.Second)
	if again, dup, err := f.RecordVersion(c, v1); err != nil || !dup || again.Seq != 1 || !again.PublishedAt.Equal(rec.PublishedAt) {
		t.Fatalf("again: %+v %v %v", again, dup, err)
	}
	changed := v1
	changed.Definition, changed.Hash = json.RawMessage(`{"id":"order","x":1}`), "h1b"
	_, _, err = f.RecordVersion(c, changed)
	wantErr(t, "a version with another definition", err, ErrExists, ErrVersionExists)
	for i := 2; i <= 4; i++ {
		v := v1
		v.Version, v.Hash = fmt.Sprint(i), fmt.Sprintf("h%d", i)
		if rec, _, err := f.RecordVersion(c, v); err != nil || rec.Seq != int64(i) {
			t.Fatalf("version %d: %+v %v", i, rec, err)
		}
	}
	other := v1
	other.FlowID = "refund"
	must3(t)(f.RecordVersion(c, other))
	defaultOne := v1
	defaultOne.Tenant = ""
	must3(t)(f.RecordVersion(c, defaultOne))

	if got := must[FlowVersion](t)(f.FlowVersion(c, "acme", "order", "3")); got.Hash != "h3" || string(got.Definition) != `{"id":"order"}` {
		t.Errorf("version 3: %+v", got)
	}
	_, err = f.FlowVersion(c, "acme", "order", "9")
	wantErr(t, "an unknown version", err, store.ErrNotFound, ErrVersionNotFound)
	p := must[Page[FlowVersion]](t)(f.ListVersions(c, "acme", "order", ListOptions{Limit: 3}))
	if len(p.Items) != 3 || p.Items[0].Version != "4" || p.Items[0].Definition != nil || p.Next == "" {
		t.Fatalf("versions page 1: %+v", p)
	}
	p = must[Page[FlowVersion]](t)(f.ListVersions(c, "acme", "order", ListOptions{Cursor: p.Next}))
	if len(p.Items) != 1 || p.Items[0].Version != "1" {
		t.Fatalf("versions page 2: %+v", p)
	}
	// Every version of every tenant, with definitions, for the engine sync.
	var all []string
	cursor := ""
	for {
		p := must[Page[FlowVersion]](t)(f.AllVersions(c, ListOptions{Cursor: cursor, Limit: 2}))
		for _, v := range p.Items {
			if v.Definition == nil {
				t.Errorf("%s without its definition", v.Version)
			}
			all = append(all, v.Tenant+"/"+v.FlowID+"/"+v.Version)
		}
		if cursor = p.Next; cursor == "" {
			break
		}
	}
	want := "[acme/order/1 acme/order/2 acme/order/3 acme/order/4 acme/refund/1 default/order/1]"
	if fmt.Sprint(all) != want {
		t.Errorf("all versions %v, want %s", all, want)
	}
	for name, bad := range map[string]FlowVersion{
		"no hash":    {Tenant: "acme", FlowID: "x", Version: "1", Definition: json.RawMessage(`{}`), HashAlgo: "fh2"},
		"no algo":    {Tenant: "acme", FlowID: "x", Version: "1", Definition: json.RawMessage(`{}`), Hash: "h"},
		"bad name":   {Tenant: "acme", FlowID: "x", Version: "a b", Definition: json.RawMessage(`{}`), Hash: "h", HashAlgo: "fh2"},
		"definition": {Tenant: "acme", FlowID: "x", Version: "1", Definition: json.RawMessage(`nope`), Hash: "h", HashAlgo: "fh2"},
	} {
		_, _, err := f.RecordVersion(c, bad)
		wantErr(t, name, err, store.ErrInvalid, nil)
	}
}

func must3(t *testing.T) func(FlowVersion, bool, error) {
	return func(_ FlowVersion, _ bool, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}
