package lease

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The keys of a worker and the scripts that change them (the package
// doc's Redis keys and Scripts), and the claim that Acquire and Run make.

// keysFor returns the lease key and the high-water key of worker id.
func keysFor(prefix string, id int64) []string {
	lease := prefix + "{" + strconv.FormatInt(id, 10) + "}"
	return []string{lease, lease + ":hw"}
}

// claimScript claims KEYS[1] for ARGV[1] with a TTL of ARGV[2] ms if it is free
// or already ours, and returns {1, mark, found} ({0} if held by another
// owner). The mark is the saved ms, or a previous holder's unreleased until if
// later; found is 0 when the hash had neither (never used, or lost). ARGV[3]
// is our own until.
var claimScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then
  return {0}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local hw = redis.call('HMGET', KEYS[2], 'ms', 'until', 'owner')
local ms, untl, by = hw[1], hw[2], hw[3]
if untl and by ~= ARGV[1] and (not ms or tonumber(untl) > tonumber(ms)) then
  ms = untl
  redis.call('HSET', KEYS[2], 'ms', ms)
end
local found = 1
if not ms and not untl then found = 0 end
redis.call('HSET', KEYS[2], 'until', ARGV[3], 'owner', ARGV[1])
return {1, ms or '', found}
`)

// raiseLua sets a hash field to a number unless it holds a larger one. The
// number is written as the caller sent it, never through Lua's tostring.
const raiseLua = `
local function raise(key, field, v)
  if v == '' then return end
  local cur = redis.call('HGET', key, field)
  if not cur or tonumber(v) > tonumber(cur) then
    redis.call('HSET', key, field, v)
  end
end
`

// renewScript extends KEYS[1] to ARGV[2] ms if ARGV[1] owns it and raises the
// saved mark to ARGV[3] and our until to ARGV[4]. It returns 1 when renewed, 0
// when the key is gone and -1 when another owner holds it.
var renewScript = redis.NewScript(raiseLua + `
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
if cur ~= ARGV[1] then return -1 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
raise(KEYS[2], 'ms', ARGV[3])
raise(KEYS[2], 'until', ARGV[4])
return 1
`)

// releaseScript, if ARGV[1] owns KEYS[1], raises the saved mark to ARGV[2],
// drops our until (we have stopped issuing) and deletes the lease. It returns
// 1 when released and 0 when not the owner.
var releaseScript = redis.NewScript(raiseLua + `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
raise(KEYS[2], 'ms', ARGV[2])
redis.call('HDEL', KEYS[2], 'until', 'owner')
redis.call('DEL', KEYS[1])
return 1
`)

// take claims worker id for Acquire and makes it the lease's worker.
func (l *Lease) take(ctx context.Context, id int64) (bool, error) {
	keys := keysFor(l.prefix, id)
	ok, st, err := l.claim(ctx, id, keys)
	if err != nil || !ok {
		return false, err
	}
	l.worker, l.keys = id, keys
	l.state.Store(st)
	return true, nil
}

// claim runs claimScript for worker id. It reports false if another owner
// holds the worker, and on success returns the new state.
func (l *Lease) claim(ctx context.Context, id int64, keys []string) (bool, *state, error) {
	start := l.now()
	res, err := claimScript.Run(ctx, l.rdb, keys, l.owner, l.ttl.Milliseconds(), untilMs(start, l.ttl)).Slice()
	if err != nil {
		return false, nil, fmt.Errorf("lease: claiming worker %d: %w", id, err)
	}
	if len(res) != 3 || res[0] != int64(1) {
		return false, nil, nil
	}
	st := &state{renewed: start}
	if res[2] == int64(0) && !l.private {
		st.issueFrom = start.Add(l.ttl)
		l.log.Warn("lease: worker id has no high-water mark: it was never used, or its state was lost; "+
			"waiting one lease ttl, until any previous holder has stopped, before issuing",
			"worker_id", id, "wait", l.ttl.String())
	}
	if s, _ := res[1].(string); s != "" {
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return false, nil, fmt.Errorf("lease: worker %d: bad high-water mark %q in %s", id, s, keys[1])
		}
		st.highWater = time.UnixMilli(ms).UTC()
	}
	return true, st, nil
}

// markMs returns t as Unix ms, or "" for the zero time (no mark).
func markMs(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

// untilMs returns the lease end, start+ttl, as Unix ms rounded up.
func untilMs(start time.Time, ttl time.Duration) string {
	return strconv.FormatInt(start.Add(ttl+time.Millisecond-1).UnixMilli(), 10)
}
