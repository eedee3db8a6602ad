package sqlite

import (
	"testing"
	"time"

	"plaita/store"
	"plaita/store/storetest"
)

// The schedules' contract on the console's database: the embedded driver of local mode is held
// to the cases Redis passes (store/contracts_test.go), each case on a migrated file of its own.
func TestSchedulesContractSQLite(t *testing.T) {
	storetest.SchedulesContract(t, storetest.SchedulesBackend{Name: "sqlite", Open: func(t *testing.T) storetest.SchedulesFixture {
		db := realClockDB(t)
		d := db.Schedules()
		exec := func(t *testing.T, query string, args ...any) {
			t.Helper()
			res, err := db.w.ExecContext(ctx(t), query, args...)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := res.RowsAffected(); err != nil || n != 1 {
				t.Fatalf("%s changed %d rows (%v), want 1", query, n, err)
			}
		}
		return storetest.SchedulesFixture{
			Schedules: store.NewSchedules(d, ""), Driver: d, Stream: "plaita:flow:queue",
			AgeClaim: func(t *testing.T, tenant, id string, tickMS int64, by time.Duration) {
				var raw string
				if err := db.w.QueryRowContext(ctx(t), `SELECT claim FROM schedule_pending WHERE root = 'plaita' AND tenant = ? AND id = ? AND tick_ms = ?`,
					tenantOf(tenant), id, tickMS).Scan(&raw); err != nil {
					t.Fatal(err)
				}
				aged, err := storetest.AgeClaimJSON(raw, by)
				if err != nil {
					t.Fatal(err)
				}
				exec(t, `UPDATE schedule_pending SET claim = ? WHERE root = 'plaita' AND tenant = ? AND id = ? AND tick_ms = ?`, aged, tenantOf(tenant), id, tickMS)
			},
			Spoil: func(t *testing.T, tenant, id string) {
				exec(t, `UPDATE schedules SET def = '{' WHERE root = 'plaita' AND tenant = ? AND id = ?`, tenantOf(tenant), id)
			},
			Drop: func(t *testing.T, tenant, id string) {
				exec(t, `DELETE FROM schedules WHERE root = 'plaita' AND tenant = ? AND id = ?`, tenantOf(tenant), id)
			},
		}
	}})
}

// tenantOf is the tenant's name as the schedules' rows key it.
func tenantOf(tenant string) string {
	if tenant == "" {
		return "default"
	}
	return tenant
}
