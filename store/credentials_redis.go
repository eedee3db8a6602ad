package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/redis/rueidis"

	"plaita/store/keys"
)

// RedisCredentialsDriver keeps each tenant's credentials in one HASH (keys.Space.Credentials),
// name → the record as JSON; a write or a delete that checks the revision is one script.
type RedisCredentialsDriver struct{ c rueidis.Client }

// RedisCredentials is the credentials' driver over client c.
func RedisCredentials(c rueidis.Client) *RedisCredentialsDriver { return &RedisCredentialsDriver{c: c} }

var _ CredentialsDriver = (*RedisCredentialsDriver)(nil)

// credentialPutScript: KEYS[1] the hash; ARGV name, record, expected revision. 1 written, 0 not.
var credentialPutScript = rueidis.NewLuaScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local want = tonumber(ARGV[3])
if cur then
  if tonumber(cjson.decode(cur)['rev']) ~= want then return 0 end
elseif want ~= 0 then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1`)

// credentialDeleteScript: KEYS[1] the hash; ARGV name, expected revision (0: any).
var credentialDeleteScript = rueidis.NewLuaScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then return 0 end
local want = tonumber(ARGV[2])
if want ~= 0 and tonumber(cjson.decode(cur)['rev']) ~= want then return 0 end
return redis.call('HDEL', KEYS[1], ARGV[1])`)

// Put runs credentialPutScript.
func (d *RedisCredentialsDriver) Put(ctx context.Context, sp keys.Space, c StoredCredential, rev int64) (bool, error) {
	c.Rev = rev + 1
	b, err := json.Marshal(c)
	if err != nil {
		return false, err
	}
	n, err := credentialPutScript.Exec(ctx, d.c, []string{sp.Credentials()}, []string{c.Name, string(b), strconv.FormatInt(rev, 10)}).AsInt64()
	if err != nil {
		return false, transient(ErrRedis, "write credential "+c.Name, err)
	}
	return n == 1, nil
}

// Get is one HGET.
func (d *RedisCredentialsDriver) Get(ctx context.Context, sp keys.Space, name string) (StoredCredential, bool, error) {
	raw, err := d.c.Do(ctx, d.c.B().Hget().Key(sp.Credentials()).Field(name).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return StoredCredential{}, false, nil
	}
	if err != nil {
		return StoredCredential{}, false, transient(ErrRedis, "read credential "+name, err)
	}
	c, err := decodeCredential(name, raw)
	return c, err == nil, err
}

// List is one HGETALL.
func (d *RedisCredentialsDriver) List(ctx context.Context, sp keys.Space) ([]StoredCredential, error) {
	all, err := d.c.Do(ctx, d.c.B().Hgetall().Key(sp.Credentials()).Build()).AsStrMap()
	if err != nil {
		return nil, transient(ErrRedis, "list credentials", err)
	}
	out := make([]StoredCredential, 0, len(all))
	for name, raw := range all {
		c, err := decodeCredential(name, raw)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Delete runs credentialDeleteScript.
func (d *RedisCredentialsDriver) Delete(ctx context.Context, sp keys.Space, name string, rev int64) (bool, error) {
	n, err := credentialDeleteScript.Exec(ctx, d.c, []string{sp.Credentials()}, []string{name, strconv.FormatInt(rev, 10)}).AsInt64()
	if err != nil {
		return false, transient(ErrRedis, "delete credential "+name, err)
	}
	return n == 1, nil
}

// decodeCredential reads a stored record; one that is not is ErrCredentialCorrupt, naming it.
func decodeCredential(name, raw string) (StoredCredential, error) {
	var c StoredCredential
	if err := json.Unmarshal([]byte(raw), &c); err != nil || c.Name != name || c.Sealed == "" {
		return StoredCredential{}, fmt.Errorf("%w: credential %s", ErrCredentialCorrupt, name)
	}
	return c, nil
}
