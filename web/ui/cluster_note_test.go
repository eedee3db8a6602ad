package ui_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"plaita/store"
	"plaita/store/sqlite"
	"plaita/test/webtest"
)

// TestUIClusterExplainsTheConfigHash: the instances table says what the configuration hash
// covers — the effective values, some of whose defaults depend on the role — so that a worker's
// hash beside a filter's other one does not read as a mismatch.
func TestUIClusterExplainsTheConfigHash(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	q := f.Root + ":flow:queue"
	f.RegisterInstance(t, store.InstanceRecord{InstanceID: "w1", Role: "worker", Status: "running", Queue: q, ConfigGeneration: "cfg1-cd9fb1d08ff1"})
	f.RegisterInstance(t, store.InstanceRecord{InstanceID: "f1", Role: "filter", Status: "running", Queue: q, ConfigGeneration: "cfg1-88c4c9bebc5d"})
	u, err := f.DB.CreateUser(context.Background(), sqlite.NewUser{Login: "ops", Password: "password-ops", PlatformAdmin: true})
	if err != nil {
		t.Fatal(err)
	}
	ops := uiLogin(t, f, u.Login, "password-ops")
	_, body := ops.get(t, "/ui/cluster", http.StatusOK)
	mustHave(t, "the cluster page", body, "cfg1-cd9fb1d08ff1", "cfg1-88c4c9bebc5d", `id="generations-note"`,
		"effective values", "PLAITA_CODE_BACKEND", "replicas of one role should match")
}

// TestUIClusterCountsStaleDelayEntries: a delay-queue entry that wakes nothing any more (here:
// its execution is gone) is counted apart from the scheduled ones, as plaita status does.
func TestUIClusterCountsStaleDelayEntries(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	member := `{"execution_id":"ex_gone","tenant_id":"default","flow_id":"f","flow_version":"1","resume_type":"timeout","node":"ask","due":"2099-01-01T00:00:00Z"}`
	due := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := f.C.Do(context.Background(), f.C.B().Zadd().Key(f.Root+":delay:queue:scheduled").ScoreMember().
		ScoreMember(float64(due.UnixMilli()), member).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	u, err := f.DB.CreateUser(context.Background(), sqlite.NewUser{Login: "ops", Password: "password-ops", PlatformAdmin: true})
	if err != nil {
		t.Fatal(err)
	}
	ops := uiLogin(t, f, u.Login, "password-ops")
	_, body := ops.get(t, "/ui/cluster", http.StatusOK)
	mustHave(t, "the cluster page", body, `1 scheduled (<span id="delay-stale">1 for waits already over: dropped when due</span>)`)
}
