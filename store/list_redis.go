package store

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"plaita/store/keys"
)

// redisLists is ListDriver on Redis: the index ZSETs, pageScript and pruneScript.
type redisLists struct{ c rueidis.Client }

var _ ListDriver = redisLists{}

// key is the ZSET of a source.
func (r redisLists) key(sp keys.Space, src ListSource) (string, error) {
	switch {
	case src.Approvals:
		return sp.ApprovalIndex(), nil
	case src.Term != nil:
		k, err := sp.IndexBy(src.Term.Field, src.Term.Value)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		return k, nil
	}
	return sp.Index(), nil
}

// Source is one ZCARD per term, pipelined (none for zero or one term).
func (r redisLists) Source(ctx context.Context, sp keys.Space, terms []IndexTerm) (ListSource, error) {
	if len(terms) == 0 {
		return ListSource{}, nil
	}
	ks := make([]string, len(terms))
	for i := range terms {
		k, err := r.key(sp, ListSource{Term: &terms[i]})
		if err != nil {
			return ListSource{}, err
		}
		ks[i] = k
	}
	if len(ks) == 1 {
		return ListSource{Term: &terms[0]}, nil
	}
	cmds := make(rueidis.Commands, len(ks))
	for i, k := range ks {
		cmds[i] = r.c.B().Zcard().Key(k).Build()
	}
	best, fewest := 0, int64(-1)
	for i, res := range r.c.DoMulti(ctx, cmds...) {
		n, err := res.AsInt64()
		if err != nil {
			return ListSource{}, transient(ErrRedis, "list executions: count "+ks[i], err)
		}
		if fewest < 0 || n < fewest {
			best, fewest = i, n
		}
	}
	return ListSource{Term: &terms[best], Empty: fewest == 0}, nil
}

// pageScript returns the next index rows after the cursor member, newest first. Anchoring on
// the member's current rank keeps pages exact while newer executions are added in front.
// When the member has left the index (deleted, or the cursor comes from another index of the
// same order: a listing by an indexed field reads an IndexBy key, whose members and scores are
// those of the tenant's index), it restarts at the first member with the cursor's score and
// skips the members of that score that sort before it (byte order, as Redis orders ties;
// compared byte by byte so the server's locale cannot matter). An upper bound on the score
// skips the members at or above it.
// KEYS: 1 index. ARGV: 1 cursor member ("" = from the top), 2 cursor score, 3 count[, 4 the
// first score left out above ("" = none)].
// Returns a flat [member, score, …] array.
var pageScript = rueidis.NewLuaScript(`
local idx, m, n = KEYS[1], ARGV[1], tonumber(ARGV[3])
local start = 0
if m ~= '' then
  local r = redis.call('ZREVRANK', idx, m)
  if r then
    start = r + 1
  else
    local s = tonumber(ARGV[2])
    local function after(a, b)
      local la, lb = #a, #b
      for i = 1, math.min(la, lb) do
        local x, y = string.byte(a, i), string.byte(b, i)
        if x ~= y then return x > y end
      end
      return la > lb
    end
    start = redis.call('ZCOUNT', idx, '(' .. ARGV[2], '+inf')
    while true do
      local rows = redis.call('ZREVRANGE', idx, start, start + 99, 'WITHSCORES')
      local moved = 0
      for i = 1, #rows, 2 do
        if tonumber(rows[i + 1]) ~= s or not after(rows[i], m) then break end
        moved = moved + 1
      end
      start = start + moved
      if moved < #rows / 2 or #rows == 0 then break end
    end
  end
end
if ARGV[4] and ARGV[4] ~= '' then
  local above = redis.call('ZCOUNT', idx, ARGV[4], '+inf')
  if above > start then start = above end
end
return redis.call('ZREVRANGE', idx, start, start + n - 1, 'WITHSCORES')
`)

// Rows runs pageScript.
func (r redisLists) Rows(ctx context.Context, sp keys.Space, src ListSource, after ListRow, n int, above string) ([]ListRow, error) {
	key, err := r.key(sp, src)
	if err != nil {
		return nil, err
	}
	args := []string{after.Member, strconv.FormatFloat(after.Score, 'g', -1, 64), strconv.Itoa(n)}
	if !src.Approvals {
		args = append(args, above)
	}
	rows, err := pageScript.Exec(ctx, r.c, []string{key}, args).ToArray()
	if err != nil {
		return nil, transient(ErrRedis, "list "+key, err)
	}
	out := make([]ListRow, 0, len(rows)/2)
	for i := 0; i+1 < len(rows); i += 2 {
		member, _ := rows[i].ToString()
		score, err := rows[i+1].AsFloat64()
		if err != nil {
			return nil, fmt.Errorf("%w: list %s: score of %q: %w", ErrRedis, key, member, err)
		}
		out = append(out, ListRow{Member: member, Score: score})
	}
	return out, nil
}

// States is one GET per state, pipelined.
func (r redisLists) States(ctx context.Context, sp keys.Space, ids []string) ([][]byte, error) {
	out := make([][]byte, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	cmds := make(rueidis.Commands, len(ids))
	for i, id := range ids {
		k, err := sp.Execution(id)
		if err != nil {
			return nil, err
		}
		cmds[i] = r.c.B().Get().Key(k).Build()
	}
	for i, res := range r.c.DoMulti(ctx, cmds...) {
		b, err := res.AsBytes()
		switch {
		case rueidis.IsRedisNil(err) || isWrongType(err):
		case err != nil:
			return nil, transient(ErrRedis, "list executions: read "+ids[i], err)
		default:
			out[i] = b
		}
	}
	return out, nil
}

// ApprovalReads is the GETs of each record and state, pipelined.
func (r redisLists) ApprovalReads(ctx context.Context, sp keys.Space, ids []string) ([]ApprovalRead, error) {
	out := make([]ApprovalRead, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	cmds := make(rueidis.Commands, 0, 2*len(ids))
	for _, id := range ids {
		rk, err := sp.Approval(id)
		if err != nil {
			return nil, err
		}
		sk, err := sp.Execution(id)
		if err != nil {
			return nil, err
		}
		cmds = append(cmds, r.c.B().Get().Key(rk).Build(), r.c.B().Get().Key(sk).Build())
	}
	res := r.c.DoMulti(ctx, cmds...)
	for i, id := range ids {
		bad := []*bool{&out[i].RecordBad, &out[i].StateBad}
		for j, dst := range []*[]byte{&out[i].Record, &out[i].State} {
			b, err := res[2*i+j].AsBytes()
			switch {
			case rueidis.IsRedisNil(err):
			case isWrongType(err):
				*bad[j] = true
			case err != nil:
				return nil, transient(ErrRedis, "list approvals: read "+id, err)
			default:
				*dst = b
			}
		}
	}
	return out, nil
}

// pruneScript removes the members whose score is still the one given.
// KEYS: 1 index. ARGV: member, score pairs. Returns the number removed.
var pruneScript = rueidis.NewLuaScript(`
local n = 0
for i = 1, #ARGV, 2 do
  local s = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if s and tonumber(s) == tonumber(ARGV[i + 1]) then
    n = n + redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
return n
`)

// PruneApprovals runs pruneScript.
func (r redisLists) PruneApprovals(ctx context.Context, sp keys.Space, rows []ListRow) (int64, error) {
	args := make([]string, 0, 2*len(rows))
	for _, row := range rows {
		args = append(args, row.Member, strconv.FormatFloat(row.Score, 'g', -1, 64))
	}
	n, err := pruneScript.Exec(ctx, r.c, []string{sp.ApprovalIndex()}, args).AsInt64()
	if err != nil {
		return 0, transient(ErrRedis, "prune approval index", err)
	}
	return n, nil
}
