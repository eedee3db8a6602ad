package control

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"plaita/engine/state"
)

// The console database's migrations through control: the schema's status at each step, what a
// migration ran, and the refusals' classes.
func TestConsoleDBMigrations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "console.db")
	url := "sqlite:///" + path
	latest := LatestMigration()
	if ms := Migrations(); latest == 0 || len(ms) == 0 || ms[len(ms)-1].Version != latest {
		t.Fatalf("migrations %+v, latest %d", ms, latest)
	}
	if got, err := ConsoleDBPath(url); err != nil || got != path {
		t.Fatalf("path %q, %v", got, err)
	}
	if got, err := ConsoleDBPath("postgres://db/console"); err != nil || got != "" {
		t.Errorf("a postgres URL: %q %v", got, err)
	}
	if _, err := ConsoleDBPath("mysql://db/console"); refusalClass(err) != Invalid {
		t.Errorf("a mysql URL: %v", err)
	}
	if _, err := OpenConsoleDB(t.Context(), url, true); refusalClass(err) != NotFound {
		t.Fatalf("a missing file with mustExist: %v", err)
	}

	db, err := OpenConsoleDB(t.Context(), url, false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Name() != path {
		t.Errorf("name %q, want %q", db.Name(), path)
	}
	s, err := db.Schema(t.Context())
	if err != nil || s.Status != SchemaBehind || s.Version != 0 || len(s.Pending) != int(latest) || s.Problem != nil {
		t.Fatalf("a new file: %+v, %v", s, err)
	}

	res, err := db.Migrate(t.Context(), MigrateUp())
	if err != nil || res.From.Version != 0 || res.To.Version != latest || res.Latest != latest || len(res.Applied) != int(latest) ||
		res.Applied[0].Direction != "up" {
		t.Fatalf("up: %+v, %v", res, err)
	}
	if s, err := db.Schema(t.Context()); err != nil || s.Status != SchemaCurrent || s.Version != latest || len(s.Pending) != 0 {
		t.Errorf("after up: %+v, %v", s, err)
	}
	// Nothing to do is an empty list of what ran, not null.
	res, err = db.Migrate(t.Context(), MigrateUp())
	want := fmt.Sprintf(`{"from":{"version":%d,"dirty":false},"to":{"version":%[1]d,"dirty":false},"latest":%[1]d,"applied":[]}`, latest)
	if b, _ := json.Marshal(res); err != nil || string(b) != want {
		t.Errorf("up again: %s, %v; want %s", b, err, want)
	}
	if _, err := db.Migrate(t.Context(), MigrateUpTo(latest+1)); refusalClass(err) != Invalid {
		t.Errorf("up to a version the binary lacks: %v", err)
	}
	res, err = db.Migrate(t.Context(), MigrateDown(1))
	if err != nil || res.To.Version != latest-1 || len(res.Applied) != 1 || res.Applied[0].Direction != "down" || res.Applied[0].Version != latest {
		t.Fatalf("down: %+v, %v", res, err)
	}
	if s, err := db.Schema(t.Context()); err != nil || s.Status != SchemaBehind || len(s.Pending) != 1 || s.Pending[0].Version != latest {
		t.Errorf("after down: %+v, %v", s, err)
	}
	if _, err := db.Migrate(t.Context(), MigrateDownTo(latest)); refusalClass(err) != Invalid {
		t.Errorf("down to a version above the database's: %v", err)
	}
	if MigrateDownTo(0).String() != "down to 0" {
		t.Errorf("target %q", MigrateDownTo(0))
	}
}

func refusalClass(err error) Class {
	if r := AsRefusal(err); r != nil {
		return r.Class
	}
	return 0
}

// A run's states in memory: what the engine saved is kept as stored, a state file goes back in
// only when it decodes.
func TestMemoryStates(t *testing.T) {
	m := NewMemoryStates()
	if _, _, ok := m.Saved("x1"); ok {
		t.Fatal("a state nobody saved")
	}
	st := &state.Execution{ExecutionID: "x1", FlowID: "f", Status: state.Suspended}
	if err := m.Storage().Save(t.Context(), st); err != nil {
		t.Fatal(err)
	}
	raw, got, ok := m.Saved("x1")
	if !ok || got == nil || got.FlowID != "f" || got.Status != state.Suspended || len(raw) == 0 {
		t.Fatalf("saved: %s %+v %v", raw, got, ok)
	}
	other := NewMemoryStates()
	if back, err := other.Put(raw); err != nil || back.ExecutionID != "x1" {
		t.Fatalf("put: %+v, %v", back, err)
	}
	if _, err := other.Put([]byte(`{"flow_id":"f"}`)); err == nil {
		t.Error("a state without an execution id was put")
	}
	if loaded, err := other.Storage().Load(t.Context(), "x1"); err != nil || loaded.FlowID != "f" {
		t.Errorf("load after put: %+v, %v", loaded, err)
	}
}
