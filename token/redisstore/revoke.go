package redisstore

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/client/revocation"
	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/syntax"
)

// The k field of a revocation log entry is its kind, the core's
// (revocation.Kind; see the package doc):
//
//	t  i: the jti;     v: the token's exp, Unix s ("" if unknown)
//	s  i: the subject; v: its new marker
//	c  i: the client;  v: its revocation time, Unix ms

// logAppendLua defines logAppend(key), which appends to the revocation log
// key the entry ARGV[2] (k), ARGV[3] (i), ARGV[4] (v), with an ID of
// Redis's clock, and trims the entries more than ARGV[1] ms older than it
// by whole listpack nodes (MINID ~: never an entry newer than that, some
// older ones until their node is all older). The floor is read off the new
// entry's ID, never a replica's clock: a revoking process whose clock runs
// ahead would otherwise trim recent entries, even the one it appended.
const logAppendLua = `
local function logAppend(key)
  local id = redis.call('XADD', key, '*', 'k', ARGV[2], 'i', ARGV[3], 'v', ARGV[4])
  local ms = tonumber(string.match(id, '^(%d+)'))
  redis.call('XTRIM', key, 'MINID', '~', string.format('%.0f', math.max(ms - tonumber(ARGV[1]), 0)))
end
`

// logAppendScript appends one entry on a Cluster, where the log is in a
// slot of its own (KEYS[1]): logAppend, with revoke's ARGV.
var logAppendScript = redis.NewScript(logAppendSrc)

const logAppendSrc = logAppendLua + `
logAppend(KEYS[1])
return 1
`

// revokeLua defines revoke(noop, write), the frame of the revocation
// scripts of a subject and a client: it returns 0, and writes and logs
// nothing, when noop says the revocation changes nothing; else, given a
// fifth ARGV (a Cluster's check before it appends the entry), 1 without
// writing either; else it appends to the revocation log, the last of KEYS,
// the entry (logAppend, with the retention ARGV[1] in ms), then runs write,
// and returns 1. With one key (a Cluster, whose log is in a slot of its
// own: the caller appends the entry) it does not log. The XADD comes before
// the write because it is the only command that can fail on a key that
// reads (a log key of another type; OOM, which Redis checks at a script's
// first write), and a failed script keeps what it wrote before the
// failure: so the key is written only once its entry is.
const revokeLua = logAppendLua + `
local function revoke(noop, write)
  if noop then
    return 0
  end
  if ARGV[5] then
    return 1
  end
  if #KEYS == 2 then
    logAppend(KEYS[2])
  end
  write()
  return 1
end
`

// logTokenLua defines logToken(log, seen), which appends the entry of a
// token's revocation (logAppend, with revoke's ARGV) to log unless the
// token's dedupe key seen exists, and then writes seen until the token
// validates nowhere: ARGV[5] ms after its exp ARGV[4] (Unix s), or, when
// its exp is unknown (ARGV[4] empty), the retention ARGV[1] ms from now,
// never longer (seen never outlives the entry it stands for). A token past
// that time by Redis's clock validates nowhere: nothing is logged. It
// returns 1 when it appended, else 0. It reads no record: a revocation of a
// token whose record is gone (evicted, lost) is logged all the same, since
// a validator that decides from the log never read the record.
const logTokenLua = logAppendLua + `
local function logToken(log, seen)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local last = now + tonumber(ARGV[1])
  if ARGV[4] ~= '' then
    last = math.min(last, tonumber(ARGV[4]) * 1000 + tonumber(ARGV[5]))
  end
  if last <= now or redis.call('EXISTS', seen) == 1 then
    return 0
  end
  logAppend(log)
  redis.call('SET', seen, '1', 'PXAT', string.format('%.0f', last))
  return 1
end
`

// revokeTokenLua logs the revocation of a token (logToken, on the log
// KEYS[2] and the dedupe key KEYS[3]) and then deletes its record KEYS[1],
// whether or not it logged: an earlier revocation whose entry went in and
// whose DEL did not (a Cluster's, below) is finished by the next. The XADD
// is the script's first write, for revokeLua's reason.
const revokeTokenLua = logTokenLua + `
local n = logToken(KEYS[2], KEYS[3])
redis.call('DEL', KEYS[1])
return n
`

// logTokenSrc is logToken alone, on KEYS[1] and KEYS[2]: the first of the
// two steps of a token's revocation on a Cluster, in the {revlog} slot.
const logTokenSrc = logTokenLua + `
return logToken(KEYS[1], KEYS[2])
`

// revokeSubjectLua gives the subject's marker KEYS[1] the new value ARGV[4],
// keeping its TTL, if it has one, and logs it either way: a subject without
// a marker has no token that passes SessionLive, but a validator that decides
// from the log never read the marker, and must hear of the revocation.
const revokeSubjectLua = revokeLua + `
return revoke(false, function() redis.call('SET', KEYS[1], ARGV[4], 'XX', 'KEEPTTL') end)
`

// revokeClientLua raises KEYS[1] to ARGV[4] and logs it; nothing when it
// holds that time or a later one already: a client's revocation time never
// moves back, and the entry that raised it to that time is in the log. A
// time that does not read fails the script (SessionLive fails the client's
// tokens closed).
const revokeClientLua = revokeLua + `
local cur = redis.call('GET', KEYS[1])
return revoke(cur and tonumber(ARGV[4]) <= tonumber(cur), function() redis.call('SET', KEYS[1], ARGV[4]) end)
`

var (
	revokeTokenScript   = redis.NewScript(revokeTokenLua)
	logTokenScript      = redis.NewScript(logTokenSrc)
	revokeSubjectScript = redis.NewScript(revokeSubjectLua)
	revokeClientScript  = redis.NewScript(revokeClientLua)
)

// scripts are every script of a Store.
var scripts = []*redis.Script{createScript, markerOnlyScript, validateOpaqueScript, logAppendScript,
	revokeTokenScript, logTokenScript, revokeSubjectScript, revokeClientScript}

// LoadScripts loads every script of a Store into rdb (SCRIPT LOAD, on every
// master of a Cluster), so that no first EVALSHA answers NOSCRIPT and takes
// a second round trip.
func LoadScripts(ctx context.Context, rdb redis.UniversalClient) error {
	for _, sc := range scripts {
		if err := sc.Load(ctx, rdb).Err(); err != nil {
			return err
		}
	}
	return nil
}

// seenKey is the dedupe key of the revocation of the token jti: it exists
// while the log holds the token's entry and the token may still validate.
func (s *Store) seenKey(jti string) string { return s.logKey + ":r:" + jti }

// RevokeToken removes the record of the JWT ref (its JTI and Subject),
// whose exp (Unix s) is exp (0: unknown), and logs it (revokeToken).
func (s *Store) RevokeToken(ctx context.Context, ref token.SessionRef, exp int64) error {
	return s.revokeToken(ctx, s.keys(ref.Subject, "", ref.JTI).record, ref.JTI, exp)
}

// RevokeOpaque removes the record of the opaque token jti, whose exp (Unix
// s) is exp (0: unknown), and logs it (revokeToken).
func (s *Store) RevokeOpaque(ctx context.Context, jti string, exp int64) error {
	return s.revokeToken(ctx, s.opaqueKey(jti), jti, exp)
}

// revokeToken removes the record key of the token jti, whose exp (Unix s)
// is exp (0: unknown), and logs it, whether or not the record exists: a
// validator that decides from the log accepts a token whose record is gone
// (evicted, lost) until the log revokes it. It logs a token once: the
// dedupe key (seenKey) lives until three leeways (Options.Leeway)
// after exp, by Redis's clock, when the token validates nowhere (at most
// the log's retention: the entry outlives it); a token past that time is
// not logged. A missing record is not an error. On a single Redis or
// Sentinel it is one script; on a Cluster, where the log and its dedupe
// keys are in a slot of their own ({revlog}), the entry's script and then
// a DEL of the record: two round trips, the record's write only once the
// entry is acknowledged (see revoke).
func (s *Store) revokeToken(ctx context.Context, key, jti string, exp int64) error {
	v := ""
	if exp > 0 {
		v = strconv.FormatInt(exp, 10)
	}
	args := []any{strconv.FormatInt(s.logRetention.Milliseconds(), 10), string(revocation.KindToken), jti, v,
		strconv.FormatInt(3*s.leeway.Milliseconds(), 10)}
	if !s.cluster {
		_, err := s.evalInt(ctx, revokeTokenScript, revokeTokenLua, []string{key, s.logKey, s.seenKey(jti)}, args...)
		return err
	}
	if _, err := s.evalInt(ctx, logTokenScript, logTokenSrc, []string{s.logKey, s.seenKey(jti)}, args...); err != nil {
		return err
	}
	if err := s.do(ctx, redis.NewIntCmd(ctx, "del", key)); err != nil {
		return unavailable(err)
	}
	return nil
}

// RelogToken appends the revocation of the token jti (exp: Unix s, 0
// unknown) to the log again, and nothing else: for a follower that found
// the log lost entries it had applied (package revlog), so that every
// validator that decides from the log hears of it again. One script in the
// log's slot.
func (s *Store) RelogToken(ctx context.Context, jti string, exp int64) error {
	v := ""
	if exp > 0 {
		v = strconv.FormatInt(exp, 10)
	}
	_, err := s.evalInt(ctx, logAppendScript, logAppendSrc, []string{s.logKey},
		strconv.FormatInt(s.logRetention.Milliseconds(), 10), string(revocation.KindToken), jti, v)
	return err
}

// RevokeSubject makes every live token of subject fail SessionLive, in O(1): it
// gives the subject a new marker, which no record holds, and keeps the
// marker's TTL, which Create has made at least as long as the longest record
// of the subject. A subject without a marker has no token that passes SessionLive,
// and gets none; the revocation is logged all the same, every time (a new
// marker each time).
func (s *Store) RevokeSubject(ctx context.Context, subject string) error {
	return s.revoke(ctx, revokeSubjectScript, revokeSubjectLua, s.keys(subject, "", "").gen, string(revocation.KindSubject), subject, newMarker(), false)
}

// RevokeClient makes every token of client whose ID's time is at or before
// before fail SessionLive, in O(1): one key with no TTL, which holds the latest
// such time. It has no TTL because a lost key would revive the tokens, and
// clients are few (the clients file lists them); no maxmemory-policy the
// service accepts evicts a key without a TTL (package redisconf). A time
// that does not raise the key's logs nothing: the entry that raised it
// covers every token this one would.
func (s *Store) RevokeClient(ctx context.Context, client string, before time.Time) error {
	if err := syntax.CheckName(client); err != nil {
		return refusal.New(token.ErrInvalidRequest, "client: %w", err)
	}
	return s.revoke(ctx, revokeClientScript, revokeClientLua, s.clientKey(client), string(revocation.KindClient), client,
		strconv.FormatInt(before.UnixMilli(), 10), true)
}

// revoke runs the revocation script sc on key with the log entry kind, id,
// v. On a single Redis or Sentinel the script writes the key and the log
// entry in one atomic step: both or neither. On a Cluster the log is in a
// slot of its own, which a script on key may not touch: the entry is
// appended first, in a round trip of its own, and the script runs only once
// Redis has acknowledged it. Either failing is token.ErrUnavailable, so a
// revocation that returns nil has both. A script that fails after the entry
// leaves an entry for a revocation that did not happen: a reader of the log
// then refuses a token Redis still holds valid (closed, and the caller, told
// token.ErrUnavailable, revokes again). The other order would leave a revocation
// without its entry, which a reader would never learn of: open. With check
// (a revocation that may change nothing: a client's), the script runs once
// before the entry with a fifth argument, which only tells whether the
// revocation changes anything: three round trips in all.
func (s *Store) revoke(ctx context.Context, sc *redis.Script, src, key, kind, id, v string, check bool) error {
	retention := strconv.FormatInt(s.logRetention.Milliseconds(), 10)
	if !s.cluster {
		_, err := s.evalInt(ctx, sc, src, []string{key, s.logKey}, retention, kind, id, v)
		return err
	}
	// Only a revocation that changes something is logged, as the script
	// does on a single Redis. A key changed between the check and the
	// script is logged by the revocation that changed it; this one's entry
	// is one too many, which a reader takes for a revocation: closed.
	if check {
		if n, err := s.evalInt(ctx, sc, src, []string{key}, retention, kind, id, v, "check"); err != nil || n == 0 {
			return err
		}
	}
	if _, err := s.evalInt(ctx, logAppendScript, logAppendSrc, []string{s.logKey}, retention, kind, id, v); err != nil {
		return err
	}
	_, err := s.evalInt(ctx, sc, src, []string{key}, retention, kind, id, v)
	return err
}
