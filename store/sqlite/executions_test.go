package sqlite

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/model"
	"plaita/store"
	"plaita/store/storetest"
)

// The local-mode storage passes the contract every execution backend passes.
func TestExecutionsStorageContract(t *testing.T) {
	t.Parallel()
	f := setup(t, WithMaxStateBytes(storetest.MaxStateBytes))
	closed := setup(t, WithMaxStateBytes(storetest.MaxStateBytes))
	closed.Close()
	var _ engine.Storage = f.Executions()
	var _ engine.CancelChecker = f.Executions()
	storetest.Contract(t, storetest.Backend{Name: "sqlite", Storage: f.Executions(), Down: closed.Executions()})

	mem := must[*DB](t)(Open(ctx(t), "sqlite://:memory:", WithMaxStateBytes(storetest.MaxStateBytes)))
	defer mem.Close()
	storetest.Contract(t, storetest.Backend{Name: "sqlite-memory", Storage: mem.Executions()})
}

// The stored state is exactly what store.Encode writes: the bytes Redis would hold.
func TestExecutionsStoreTheEncodedBytes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := ctx(t)
	x := f.Executions()
	st := storetest.NewState("ex_bytes", state.Running)
	st.TenantID = "acme"
	st.Input = map[string]any{"b": 1, "a": []any{"<&>", 2.5}}
	if err := x.Save(c, st); err != nil {
		t.Fatal(err)
	}
	want := must[[]byte](t)(store.Encode(st))
	var raw, tenant, status string
	if err := f.r.QueryRow("SELECT state, tenant, status FROM local_executions WHERE execution_id = ?", "ex_bytes").Scan(&raw, &tenant, &status); err != nil {
		t.Fatal(err)
	}
	if raw != string(want) || tenant != "acme" || status != "running" {
		t.Errorf("stored %s (%s, %s)\nwant   %s", raw, tenant, status, want)
	}
	// Bytes that do not decode are corrupt, permanently.
	if _, err := f.w.Exec("UPDATE local_executions SET state = '{not json' WHERE execution_id = 'ex_bytes'"); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Load(c, "ex_bytes"); !errors.Is(err, store.ErrStateCorrupt) || model.IsTransient(err) {
		t.Errorf("corrupt: %v", err)
	}
	if err := x.Save(c, nil); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("nil: %v", err)
	}
	bad := storetest.NewState("bad id!", state.Running)
	if err := x.Save(c, bad); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("bad id: %v", err)
	}
}

func TestExecutionsCompareAndSwap(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := ctx(t)
	x := f.Executions()
	st := storetest.NewState("ex_cas", state.Running)
	if err := x.Save(c, st); err != nil {
		t.Fatal(err)
	}
	_, gen := must2st(t)(x.LoadGeneration(c, "ex_cas"))
	st.StepCount = 1
	next := must[int64](t)(x.SaveIf(c, st, gen))
	if next != gen+1 {
		t.Fatalf("generation %d after %d", next, gen)
	}
	// The old generation no longer matches.
	if _, err := x.SaveIf(c, st, gen); !errors.Is(err, ErrExecutionChanged) || !errors.Is(err, ErrPrecondition) {
		t.Errorf("stale generation: %v", err)
	}
	if _, err := x.SaveIf(c, storetest.NewState("ex_gone", state.Running), 1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a missing execution: %v", err)
	}
	// A plain save moves the generation too.
	if err := x.Save(c, st); err != nil {
		t.Fatal(err)
	}
	if _, g := must2st(t)(x.LoadGeneration(c, "ex_cas")); g != next+1 {
		t.Errorf("generation %d after a save", g)
	}
}

func must2st(t *testing.T) func(*state.Execution, int64, error) (*state.Execution, int64) {
	return func(st *state.Execution, gen int64, err error) (*state.Execution, int64) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return st, gen
	}
}

func TestExecutionsListCancelDelete(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := ctx(t)
	x := f.Executions()
	base := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	for i := range 5 {
		st := storetest.NewState(fmt.Sprintf("ex_%d", i), state.Running)
		st.StartTime = base.Add(time.Duration(i) * time.Minute)
		st.TenantID = "acme"
		if i == 4 {
			st.TenantID, st.FlowID = "", "other"
		}
		if i == 3 {
			st.Status = state.Completed
		}
		if err := x.Save(c, st); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(p Page[ExecutionSummary]) string {
		var out []string
		for _, e := range p.Items {
			out = append(out, e.ExecutionID)
		}
		return fmt.Sprint(out)
	}
	p := must[Page[ExecutionSummary]](t)(x.List(c, ExecutionQuery{Tenant: "acme", ListOptions: ListOptions{Limit: 2}}))
	if ids(p) != "[ex_3 ex_2]" || p.Next == "" || !p.Items[0].StartedAt.Equal(base.Add(3*time.Minute)) {
		t.Fatalf("page 1: %+v", p)
	}
	p = must[Page[ExecutionSummary]](t)(x.List(c, ExecutionQuery{Tenant: "acme", ListOptions: ListOptions{Limit: 2, Cursor: p.Next}}))
	if ids(p) != "[ex_1 ex_0]" || p.Next != "" {
		t.Fatalf("page 2: %+v", p)
	}
	if p := must[Page[ExecutionSummary]](t)(x.List(c, ExecutionQuery{Tenant: "acme", Status: state.Running})); ids(p) != "[ex_2 ex_1 ex_0]" {
		t.Errorf("running: %s", ids(p))
	}
	if p := must[Page[ExecutionSummary]](t)(x.List(c, ExecutionQuery{Tenant: "", FlowID: "other"})); ids(p) != "[ex_4]" {
		t.Errorf("default tenant, flow other: %s", ids(p))
	}

	if cancelled := must[bool](t)(x.Cancelled(c, "ex_1")); cancelled {
		t.Error("cancelled before the flag")
	}
	if err := x.RequestCancel(c, "ex_1"); err != nil {
		t.Fatal(err)
	}
	if cancelled := must[bool](t)(x.Cancelled(c, "ex_1")); !cancelled {
		t.Error("the cancel flag did not stick")
	}
	if err := x.RequestCancel(c, "ex_none"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("cancel a missing execution: %v", err)
	}
	if cancelled := must[bool](t)(x.Cancelled(c, "ex_none")); cancelled {
		t.Error("a missing execution is cancelled")
	}
	if err := x.Delete(c, "ex_1"); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Load(c, "ex_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("load after delete: %v", err)
	}
	if err := x.Delete(c, "ex_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("delete again: %v", err)
	}
}

func TestReconcileOrphans(t *testing.T) {
	t.Parallel()
	for _, mode := range []OrphanMode{OrphanSuspend, OrphanFail} {
		t.Run(string(mode), func(t *testing.T) {
			f := setup(t)
			c := ctx(t)
			x := f.Executions()
			for i, status := range []state.Status{state.Running, state.Running, state.Suspended, state.Completed, state.Running} {
				st := storetest.NewState(fmt.Sprintf("ex_%d", i), status)
				st.CurrentNode = "step"
				if err := x.Save(c, st); err != nil {
					t.Fatal(err)
				}
			}
			// ex_4's executor settles it between the reconcile's read and its write: the
			// compare-and-swap leaves it as the executor wrote it.
			f.beforeOrphanUpdate = func(id string) {
				if id == "ex_4" {
					done := storetest.NewState("ex_4", state.Completed)
					if err := x.Save(c, done); err != nil {
						t.Error(err)
					}
				}
			}
			now := time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)
			res := must[ReconcileResult](t)(x.ReconcileOrphans(c, mode, now))
			if res.Running != 3 || len(res.Changed) != 2 || fmt.Sprint(res.Skipped) != "[ex_4]" || len(res.Failed) != 0 {
				t.Fatalf("result %+v", res)
			}
			for _, id := range []string{"ex_0", "ex_1"} {
				st := must[*state.Execution](t)(x.Load(c, id))
				last := st.Timeline[len(st.Timeline)-1]
				switch mode {
				case OrphanSuspend:
					if st.Status != state.Suspended || st.Suspend == nil || st.Suspend.Kind != SuspendOrphan || st.Suspend.Node != "step" || !st.Suspend.Since.Equal(now) || last.Event != "suspended" {
						t.Errorf("%s: %+v %+v", id, st, st.Suspend)
					}
				case OrphanFail:
					if st.Status != state.Error || st.Error == nil || st.Error.Type != ErrTypeOrphaned || !st.Error.Permanent || st.EndTime == nil || !st.EndTime.Equal(now) || last.Event != "error" {
						t.Errorf("%s: %+v %+v", id, st, st.Error)
					}
				}
				if !st.LastUpdate.Equal(now) || last.Seq != 1 || last.Node != "step" {
					t.Errorf("%s: last update %v, timeline %+v", id, st.LastUpdate, st.Timeline)
				}
				if p := must[Page[ExecutionSummary]](t)(x.List(c, ExecutionQuery{Status: st.Status})); len(p.Items) == 0 {
					t.Errorf("the status column was not updated for %s", id)
				}
			}
			// Rows that were not running are untouched.
			if st := must[*state.Execution](t)(x.Load(c, "ex_2")); st.Status != state.Suspended || st.Suspend != nil {
				t.Errorf("a suspended execution was changed: %+v", st)
			}
			if st := must[*state.Execution](t)(x.Load(c, "ex_4")); st.Status != state.Completed || len(st.Timeline) != 0 {
				t.Errorf("the execution settled concurrently was changed: %+v", st)
			}
			// A second reconcile finds nothing running.
			f.beforeOrphanUpdate = nil
			if res := must[ReconcileResult](t)(x.ReconcileOrphans(c, mode, now)); res.Running != 0 || len(res.Changed) != 0 {
				t.Errorf("second reconcile: %+v", res)
			}
		})
	}
	t.Run("off and bad modes", func(t *testing.T) {
		f := setup(t)
		c := ctx(t)
		x := f.Executions()
		if err := x.Save(c, storetest.NewState("ex_0", state.Running)); err != nil {
			t.Fatal(err)
		}
		if res := must[ReconcileResult](t)(x.ReconcileOrphans(c, OrphanOff, time.Now())); res.Running != 0 || len(res.Changed) != 0 {
			t.Errorf("off: %+v", res)
		}
		if st := must[*state.Execution](t)(x.Load(c, "ex_0")); st.Status != state.Running {
			t.Errorf("off changed a row: %s", st.Status)
		}
		if _, err := x.ReconcileOrphans(c, "restart", time.Now()); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("unknown mode: %v", err)
		}
		// An undecodable running row is reported, the others still settled.
		if _, err := f.w.Exec("INSERT INTO local_executions (execution_id, tenant, flow_id, flow_version, status, state, generation, cancel_requested, started_at, updated_at) " +
			"VALUES ('ex_bad', 'default', 'f', '1', 'running', '{', 1, FALSE, 0, 0)"); err != nil {
			t.Fatal(err)
		}
		res := must[ReconcileResult](t)(x.ReconcileOrphans(c, OrphanFail, time.Now()))
		if len(res.Changed) != 1 || len(res.Failed) != 1 || res.Failed[0].ExecutionID != "ex_bad" {
			t.Errorf("with a corrupt row: %+v", res)
		}
	})
}

// The reconcile reads the running rows in batches: more than one batch is all settled.
func TestReconcileOrphansInBatches(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := ctx(t)
	x := f.Executions()
	n := reconcileBatch + 7
	for i := range n {
		if err := x.Save(c, storetest.NewState(fmt.Sprintf("ex_%04d", i), state.Running)); err != nil {
			t.Fatal(err)
		}
	}
	res := must[ReconcileResult](t)(x.ReconcileOrphans(c, OrphanSuspend, time.Now()))
	if res.Running != n || len(res.Changed) != n {
		t.Errorf("%d running, %d changed, want %d", res.Running, len(res.Changed), n)
	}
}
