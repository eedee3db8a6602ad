package store

import (
	"context"
	"time"

	"plaita/store/keys"
)

// StateDriver is the storage of execution states and of what fences and counts them: the
// state with its TTL and its place in the tenant's index (and the IndexBy lists of its indexed
// values), the resume lease and the fence generation, the cancel flag, the tombstone and the
// per-execution counters. TenantStore, Lease and FencedStorage keep every rule (encoding and
// its bounds, the lease's protocol and watchdog, errors); a driver only stores, one atomic step
// per method. The Redis driver (redisState) is the cluster's: one round trip per method, as
// the comments of redis.go count them; store/sqlite's is local mode's. storetest's
// StateContract holds both.
type StateDriver interface {
	// Ping checks that the storage answers.
	Ping(ctx context.Context) error
	// Save writes w unfenced and indexes it.
	Save(ctx context.Context, sp keys.Space, w StateWrite) error
	// Load reads id's state bytes and whether the index has its member. No state is
	// ErrNotFound; something else stored under its name is a *CorruptStateError.
	Load(ctx context.Context, sp keys.Space, id string) (raw []byte, indexed bool, err error)
	// Get is Load without the index check.
	Get(ctx context.Context, sp keys.Space, id string) ([]byte, error)
	// Reindex puts id back in the index and its IndexBy lists where it is missing (a member
	// there keeps its score).
	Reindex(ctx context.Context, sp keys.Space, id string, score float64, index map[string]string) error
	// Begin takes id's lease, moves its fence generation on and reads what a run needs (see
	// BeginCall), in one step.
	Begin(ctx context.Context, sp keys.Space, c BeginCall) (BeginReply, error)
	// FencedSave writes c.W only while the fence generation is c.Gen, and reads the cancel
	// flag in the same step.
	FencedSave(ctx context.Context, sp keys.Space, c FencedSave) (FencedReply, error)
	// BeginSave is Begin and FencedSave in one step for an execution that must not exist.
	BeginSave(ctx context.Context, sp keys.Space, c BeginSaveCall) (BeginReply, error)
	// Renew extends id's lease while its value is value (false: not ours).
	Renew(ctx context.Context, sp keys.Space, id, value string, ttl time.Duration) (bool, error)
	// Release deletes id's lease while its value is value (false: not ours).
	Release(ctx context.Context, sp keys.Space, id, value string) (bool, error)
	// Delete removes id's state, lease, cancel flag and counters, moves its fence generation
	// on and writes its tombstone (fenced: only while the generation is gen), and takes it out
	// of the index and its IndexBy lists.
	Delete(ctx context.Context, sp keys.Space, id string, fenced bool, gen int64, tomb []byte, tombTTL time.Duration) (FencedReply, error)
	// SetCancel raises (on) or lowers id's cancel flag; a raised flag lasts MechanismTTL.
	SetCancel(ctx context.Context, sp keys.Space, id string, on bool) error
	// Has reports whether id's cancel flag is raised or its tombstone is there.
	Has(ctx context.Context, sp keys.Space, id string, f Flag) (bool, error)
	// Incr increments a counter family of id (its TTL MechanismTTL from now); node, when not
	// "", names a per-node retry counter instead.
	Incr(ctx context.Context, sp keys.Space, family, id, node string) (int64, error)
	// Counter reads a counter (0 when unset); node as for Incr.
	Counter(ctx context.Context, sp keys.Space, family, id, node string) (int64, error)
	// NodeRetries reads every per-node retry counter of id, by node.
	NodeRetries(ctx context.Context, sp keys.Space, id string) (map[string]int64, error)
	// ResetCounter deletes a counter; node as for Incr.
	ResetCounter(ctx context.Context, sp keys.Space, family, id, node string) error
	// Snapshot reads id's state bytes and whether a lease is held, in one step.
	Snapshot(ctx context.Context, sp keys.Space, id string) (raw []byte, leased bool, err error)
	// Replace writes w in place of the bytes read (read), only while the state holds exactly
	// them: ReplaceUnleased also only while no lease is held; ReplaceFencing moves the fence
	// generation on and drops the lease with the write. ReplaceUnleased moves the generation on
	// too, so a lease taken later writes after it.
	Replace(ctx context.Context, sp keys.Space, read []byte, w StateWrite, how ReplaceHow) (Replaced, error)
}

// ReplaceHow says what a replacement of a state read fences.
type ReplaceHow int

const (
	ReplaceUnleased ReplaceHow = iota // only while no lease is held (the reaper)
	ReplaceFencing                    // whatever holds it: every lease taken before is fenced out (a corrupt state)
)

// Replaced is a replacement's outcome.
type Replaced int

const (
	ReplacedChanged Replaced = iota // the state no longer holds the bytes read: nothing written
	ReplacedWritten
	ReplacedLeased // a lease is held: nothing written (ReplaceUnleased)
)

// Flag is a presence flag of an execution.
type Flag int

const (
	FlagCancel    Flag = iota // the cancel flag
	FlagTombstone             // the execution was deleted
)

// StateWrite is an encoded state and where it is written.
type StateWrite struct {
	ID      string
	Payload []byte
	TTL     time.Duration     // 0: none (a write also clears an earlier TTL)
	Score   float64           // the index score: start time in ms
	Index   map[string]string // the state's indexed values (state.Execution.Index)
}

// LeaseRef is a lease value to take: holder|token, and its TTL.
type LeaseRef struct {
	Value string
	TTL   time.Duration
}

// BeginCall is a run's first step: take the lease (Takeover, when not "", names a holder whose
// leftover lease is taken over), and — when Fresh is set — write and index Fresh if the
// execution has no state and no tombstone.
type BeginCall struct {
	ID       string
	Lease    LeaseRef
	Takeover string
	Fresh    *StateWrite
}

// BeginReply is what Begin and BeginSave found. Held is the current lease value when another
// holder has the lease (nothing else is set then); NotFresh (BeginSave) says the execution
// exists, nothing was written and the lease is free again.
type BeginReply struct {
	Held       string
	Taken      bool
	NotFresh   bool
	Generation int64
	TookOver   bool
	State      []byte // nil: none
	Tombstoned bool
	Cancelled  bool
	NoFail     int64
	Created    bool // Fresh was written
	Indexed    bool // and indexed
}

// FencedSave is a save under a lease's generation; Release deletes the lease with it, Index
// (re)indexes the state.
type FencedSave struct {
	W       StateWrite
	Gen     int64
	Release bool
	Index   bool
}

// FencedReply is a fenced write's outcome: Lost with the fence generation found ("" none), or
// done, with the cancel flag as it was read and whether the state was indexed.
type FencedReply struct {
	Lost      bool
	FenceGen  string
	Cancelled bool
	Indexed   bool
}

// BeginSaveCall is a deferred lease's first save.
type BeginSaveCall struct {
	W       StateWrite
	Lease   LeaseRef
	Holder  string // a leftover lease of this holder is taken over
	Release bool
}
