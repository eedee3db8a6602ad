package roles

import (
	"github.com/redis/rueidis"

	"plaita/queue"
	"plaita/store"
	"plaita/store/keys"
	"plaita/store/sqlite"
)

// Backend is where the roles keep their state, as the drivers of package queue and store: Redis
// for the cluster (RedisBackend), the console's database with an in-process hub for local mode
// (LocalBackend). A role builds its parts from one — the same parts, the same rules, either
// way; only the drivers differ, and each driver pair is held to one contract (queuetest,
// storetest).
type Backend struct {
	// Client is the Redis client; nil in local mode, where what only Redis does (the legacy
	// List drain, the key-space survey, the dispatch ledger, the index backfill) is off.
	Client      rueidis.Client
	Queue       queue.Driver
	Delay       queue.DelayDriver
	Store       store.Drivers
	Flows       store.FlowsDriver
	Schedules   store.SchedulesDriver
	Events      store.EventsDriver
	Credentials store.CredentialsDriver
	Ephemeral   store.Ephemeral
}

// RedisBackend is the cluster's backend over client c.
func RedisBackend(c rueidis.Client) Backend {
	return Backend{Client: c, Queue: queue.Redis(c), Delay: queue.RedisDelays(c), Store: store.RedisDrivers(c),
		Flows: store.RedisFlows(c), Schedules: store.RedisSchedules(c), Events: store.RedisEvents(c), Credentials: store.RedisCredentials(c), Ephemeral: store.OnRedis(c)}
}

// LocalBackend is local mode's backend: the console's database db, and hub for what lives only
// while the process runs (live events, control channels, the registry).
func LocalBackend(db *sqlite.DB, hub *store.Hub) Backend {
	return Backend{Queue: db.Broker(), Delay: db.Delays(), Store: db.StoreDrivers(), Flows: db.FlowStore(),
		Schedules: db.Schedules(), Events: db.EventStore(hub), Credentials: db.Credentials(), Ephemeral: hub}
}

// events is the event bus with settings s.
func (b Backend) events(s store.EventSettings) *store.Events {
	return store.NewEvents(b.Events, s, keys.DefaultRoot)
}

// Storage is the execution storage with settings s.
func (b Backend) Storage(s store.Settings) *store.Redis {
	if b.Client != nil {
		return store.NewRedis(b.Client, s, keys.DefaultRoot)
	}
	return store.NewStore(b.Store, s, keys.DefaultRoot)
}
