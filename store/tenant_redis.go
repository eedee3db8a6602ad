package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"plaita/store/keys"
)

// redisTenants is TenantDriver on Redis: <root>:tenant_status (HASH tenant → status),
// <root>:tenant_status:epoch, <root>:tenant_quota (HASH tenant → limit) and each tenant's
// running ZSET (execution id → slot expiry, Unix ms).
type redisTenants struct{ c rueidis.Client }

var _ TenantDriver = redisTenants{}

// Status is HGET of the status and, with withEpoch, GET of the epoch, pipelined (two keys in
// two slots: not atomic — a status written between the two reads is seen with the epoch
// before or after it, which the next dispatch corrects).
func (r redisTenants) Status(ctx context.Context, sp keys.Space, withEpoch bool) (TenantStatusRead, error) {
	c := r.c
	cmds := rueidis.Commands{c.B().Hget().Key(sp.TenantStatus()).Field(sp.Tenant()).Build()}
	if withEpoch {
		cmds = append(cmds, c.B().Get().Key(sp.TenantStatusEpoch()).Build())
	}
	res := c.DoMulti(ctx, cmds...)
	var out TenantStatusRead
	var err error
	if out.Status, out.Found, err = optString(res[0]); err != nil {
		return TenantStatusRead{}, transient(ErrRedis, "read "+sp.TenantStatus()+" "+sp.Tenant(), err)
	}
	if withEpoch {
		if out.Epoch, out.EpochFound, err = optString(res[1]); err != nil {
			return TenantStatusRead{}, transient(ErrRedis, "read "+sp.TenantStatusEpoch(), err)
		}
	}
	return out, nil
}

// StatusTenants is HKEYS.
func (r redisTenants) StatusTenants(ctx context.Context, sp keys.Space) ([]string, error) {
	out, err := r.c.Do(ctx, r.c.B().Hkeys().Key(sp.TenantStatus()).Build()).AsStrSlice()
	if err != nil {
		return nil, transient(ErrRedis, "read "+sp.TenantStatus(), err)
	}
	return out, nil
}

// WriteStatuses is one HSET of every status and the SET of the epoch, pipelined.
func (r redisTenants) WriteStatuses(ctx context.Context, sp keys.Space, statuses map[string]string, epoch string) error {
	c := r.c
	hset := c.B().Hset().Key(sp.TenantStatus()).FieldValue()
	for _, tenant := range slices.Sorted(maps.Keys(statuses)) {
		hset = hset.FieldValue(tenant, statuses[tenant])
	}
	cmds := rueidis.Commands{c.B().Set().Key(sp.TenantStatusEpoch()).Value(epoch).Build()}
	if len(statuses) > 0 {
		cmds = append(rueidis.Commands{hset.Build()}, cmds...)
	}
	for i, res := range c.DoMulti(ctx, cmds...) {
		if err := res.Error(); err != nil {
			what := "write " + sp.TenantStatusEpoch()
			if i == 0 && len(cmds) == 2 {
				what = "write " + sp.TenantStatus()
			}
			return transient(ErrRedis, what, err)
		}
	}
	return nil
}

// QuotaOverride is HGET.
func (r redisTenants) QuotaOverride(ctx context.Context, sp keys.Space) (string, bool, error) {
	raw, found, err := optString(r.c.Do(ctx, r.c.B().Hget().Key(sp.TenantQuota()).Field(sp.Tenant()).Build()))
	if err != nil {
		return "", false, transient(ErrRedis, "read "+sp.TenantQuota()+" "+sp.Tenant(), err)
	}
	return raw, found, nil
}

// admitScript: KEYS[1] = the tenant's running ZSET. ARGV: now (ms), expiry (ms), execution
// id, limit (<=0 = unlimited), force (1 = add even over the limit), key TTL (ms).
// Returns {admitted, running, over}: over = 1 when the slot was added over the limit (force).
// It touches only KEYS[1]: one slot, cluster-safe.
var admitScript = rueidis.NewLuaScript(`
local key = KEYS[1]
local now, expiry, member = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local limit, force, ttl = tonumber(ARGV[4]), ARGV[5] == '1', tonumber(ARGV[6])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
if redis.call('ZSCORE', key, member) then
  redis.call('ZADD', key, expiry, member)
  redis.call('PEXPIRE', key, ttl)
  return {1, redis.call('ZCARD', key), 0}
end
local n = redis.call('ZCARD', key)
local over = 0
if limit > 0 and n >= limit then
  if not force then return {0, n, 0} end
  over = 1
end
redis.call('ZADD', key, expiry, member)
redis.call('PEXPIRE', key, ttl)
return {1, n + 1, over}
`)

// Admit runs admitScript.
func (r redisTenants) Admit(ctx context.Context, sp keys.Space, req RunningAdmit) (RunningAdmission, error) {
	now, ttl := req.Now.UnixMilli(), req.TTL.Milliseconds()
	key := sp.TenantRunning()
	arr, err := admitScript.Exec(ctx, r.c, []string{key}, []string{
		strconv.FormatInt(now, 10), strconv.FormatInt(now+ttl, 10), req.ExecutionID,
		strconv.Itoa(req.Limit), boolArg(req.Force), strconv.FormatInt(ttl, 10),
	}).AsIntSlice()
	if err != nil {
		return RunningAdmission{}, transient(ErrRedis, "admit running slot "+key+" "+req.ExecutionID, err)
	}
	if len(arr) != 3 {
		return RunningAdmission{}, fmt.Errorf("%w: admit running slot %s: unexpected reply %v", ErrRedis, key, arr)
	}
	return RunningAdmission{Admitted: arr[0] == 1, Running: int(arr[1]), Over: arr[2] == 1}, nil
}

// Release is ZREM.
func (r redisTenants) Release(ctx context.Context, sp keys.Space, executionID string) error {
	if err := r.c.Do(ctx, r.c.B().Zrem().Key(sp.TenantRunning()).Member(executionID).Build()).Error(); err != nil {
		return transient(ErrRedis, "release running slot "+sp.TenantRunning()+" "+executionID, err)
	}
	return nil
}

// CountRunning is ZCOUNT (now +inf.
func (r redisTenants) CountRunning(ctx context.Context, sp keys.Space, now time.Time) (int, error) {
	n, err := r.c.Do(ctx, r.c.B().Zcount().Key(sp.TenantRunning()).
		Min("("+strconv.FormatInt(now.UnixMilli(), 10)).Max("+inf").Build()).AsInt64()
	if err != nil {
		return 0, transient(ErrRedis, "count running slots "+sp.TenantRunning(), err)
	}
	return int(n), nil
}

// optString reads a string reply; a nil reply is found = false.
func optString(r rueidis.RedisResult) (s string, found bool, err error) {
	s, err = r.ToString()
	if rueidis.IsRedisNil(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return s, true, nil
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
