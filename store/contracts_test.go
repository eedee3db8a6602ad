package store_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"plaita/store"
	"plaita/store/keys"
	"plaita/store/storetest"
	"plaita/test/redistest"
)

// The event bus's contract on Redis, each case under a key root of its own.
func TestEventsContractRedis(t *testing.T) {
	storetest.EventsContract(t, storetest.EventsBackend{Name: "redis", Open: func(t *testing.T) func(store.EventSettings) *store.Events {
		c := redistest.Client(t)
		root := redistest.Root(t, c)
		return func(s store.EventSettings) *store.Events { return store.NewEvents(store.RedisEvents(c), s, root) }
	}})
}

// The schedules' contract on Redis, each case under a key root of its own.
func TestSchedulesContractRedis(t *testing.T) {
	storetest.SchedulesContract(t, storetest.SchedulesBackend{Name: "redis", Open: func(t *testing.T) storetest.SchedulesFixture {
		c := redistest.Client(t)
		root := redistest.Root(t, c)
		d := store.RedisSchedules(c)
		record := func(t *testing.T, tenant, id string) string {
			t.Helper()
			k, err := keys.MustFor(root, tenant).Schedule(id)
			if err != nil {
				t.Fatal(err)
			}
			return k
		}
		do := func(t *testing.T, cmd rueidis.Completed) rueidis.RedisResult {
			t.Helper()
			res := c.Do(context.Background(), cmd)
			if err := res.Error(); err != nil {
				t.Fatal(err)
			}
			return res
		}
		return storetest.SchedulesFixture{
			Schedules: store.NewSchedules(d, root), Driver: d, Stream: root + ":flow:queue",
			AgeClaim: func(t *testing.T, tenant, id string, tickMS int64, by time.Duration) {
				key, field := record(t, tenant, id), "pending:"+strconv.FormatInt(tickMS, 10)
				raw, err := do(t, c.B().Hget().Key(key).Field(field).Build()).ToString()
				if err != nil {
					t.Fatal(err)
				}
				aged, err := storetest.AgeClaimJSON(raw, by)
				if err != nil {
					t.Fatal(err)
				}
				do(t, c.B().Hset().Key(key).FieldValue().FieldValue(field, aged).Build())
			},
			Spoil: func(t *testing.T, tenant, id string) {
				do(t, c.B().Hset().Key(record(t, tenant, id)).FieldValue().FieldValue("def", "{").Build())
			},
			Drop: func(t *testing.T, tenant, id string) {
				do(t, c.B().Del().Key(record(t, tenant, id)).Build())
			},
		}
	}})
}

// The execution storage's lease and fencing contract on Redis.
func TestStateContractRedis(t *testing.T) {
	storetest.StateContract(t, storetest.StateBackend{Name: "redis", Open: func(t *testing.T, leaseTTL time.Duration) *store.Redis {
		c := redistest.Client(t)
		s := store.DefaultSettings()
		s.LeaseTTL = leaseTTL
		return store.NewRedis(c, s, redistest.Root(t, c))
	}})
}

// The listings' contract on Redis.
func TestListContractRedis(t *testing.T) {
	storetest.ListContract(t, storetest.ListBackend{Name: "redis", Open: func(t *testing.T) *store.Redis {
		c := redistest.Client(t)
		return store.NewRedis(c, store.DefaultSettings(), redistest.Root(t, c))
	}})
}

// The tenant gates' contract on Redis.
func TestTenantContractRedis(t *testing.T) {
	storetest.TenantContract(t, storetest.TenantBackend{Name: "redis", Open: func(t *testing.T) *store.Redis {
		c := redistest.Client(t)
		return store.NewRedis(c, store.DefaultSettings(), redistest.Root(t, c))
	}})
}

// The wake-up records' contract on Redis.
func TestWakeupContractRedis(t *testing.T) {
	storetest.WakeupContract(t, storetest.WakeupBackend{Name: "redis", Open: func(t *testing.T) *store.Redis {
		c := redistest.Client(t)
		return store.NewRedis(c, store.DefaultSettings(), redistest.Root(t, c))
	}})
}

// The published flows' contract on Redis, each case under a key root of its own.
func TestFlowsContractRedis(t *testing.T) {
	storetest.FlowsContract(t, storetest.FlowsBackend{Name: "redis", Open: func(t *testing.T) *store.Flows {
		c := redistest.Client(t)
		return store.NewFlows(store.RedisFlows(c), redistest.Root(t, c))
	}})
}

// The live events' contract on Redis, each case under a key root of its own.
func TestLiveContractRedis(t *testing.T) {
	storetest.LiveContract(t, storetest.LiveBackend{Name: "redis", Open: func(t *testing.T) *store.LiveEvents {
		c := redistest.Client(t)
		return store.NewLiveEvents(store.OnRedis(c), redistest.Root(t, c))
	}})
}

// The contracts of what lives only while processes run (live events, the registry, the
// control channels) on the in-process hub of local mode.
func TestEphemeralContractsHub(t *testing.T) {
	storetest.LiveContract(t, storetest.LiveBackend{Name: "hub", Open: func(t *testing.T) *store.LiveEvents {
		return store.NewLiveEvents(store.NewHub(), "")
	}})
	storetest.RegistryContract(t, storetest.RegistryBackend{Name: "hub", Open: func(t *testing.T) *store.Registry {
		return store.NewRegistry(store.NewHub(), "")
	}})
	storetest.ControlContract(t, storetest.ControlBackend{Name: "hub", Open: func(t *testing.T) *store.Control {
		return store.NewControl(store.NewHub(), "")
	}})
}

// The instance registry's contract on Redis, each case under a key root of its own.
func TestRegistryContractRedis(t *testing.T) {
	storetest.RegistryContract(t, storetest.RegistryBackend{Name: "redis", Open: func(t *testing.T) *store.Registry {
		c := redistest.Client(t)
		return store.NewRegistry(store.OnRedis(c), redistest.Root(t, c))
	}})
}

// The control channels' contract on Redis, each case under a key root of its own.
func TestControlContractRedis(t *testing.T) {
	storetest.ControlContract(t, storetest.ControlBackend{Name: "redis", Open: func(t *testing.T) *store.Control {
		c := redistest.Client(t)
		return store.NewControl(store.OnRedis(c), redistest.Root(t, c))
	}})
}

// The credentials' contract on Redis, each case under a key root of its own.
func TestCredentialsContractRedis(t *testing.T) {
	storetest.CredentialsContract(t, storetest.CredentialsBackend{Name: "redis", Open: func(t *testing.T) *store.Credentials {
		c := redistest.Client(t)
		return store.NewCredentials(store.RedisCredentials(c), redistest.Root(t, c))
	}})
}
