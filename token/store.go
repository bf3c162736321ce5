package token

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// DefaultKeyPrefix starts every key the Store writes.
const DefaultKeyPrefix = "st:"

// Store keeps session records in Redis; see the package doc for the keys.
type Store struct {
	rdb      redis.UniversalClient
	cluster  bool // a subject's keys and a client's are in different slots
	prefix   string
	readyKey string // written by Ready
	batch    *batcher
	tracer   trace.Tracer // nil: no spans
	// logKey is the revocation log, a Stream; logRetention how long its
	// entries stay (StoreOptions.LogRetention), by Redis's clock.
	logKey       string
	logRetention time.Duration
	leeway       time.Duration // StoreOptions.Leeway
}

// DefaultStoreTimeout bounds every call of a Store when StoreOptions says nothing.
const DefaultStoreTimeout = 2 * time.Second

// StoreOptions configures a Store. Zero values mean the documented defaults.
type StoreOptions struct {
	// Prefix starts every key. Empty means DefaultKeyPrefix.
	Prefix string
	// Timeout bounds every call, whatever Redis does (frozen, a half-open
	// connection, a slow script): the call returns ErrUnavailable by then.
	// Zero means DefaultStoreTimeout.
	Timeout time.Duration
	// TracerProvider, if set, records a span for each call, a child of the
	// request's, and one for each pipeline; see package tracing. Nil: none,
	// at no cost.
	TracerProvider trace.TracerProvider
	// LogRetention is how long an entry of the revocation log stays: every
	// revocation appends one, and trims those older than this. It must be at
	// least LogRetention(MaxTTL, Leeway) of every Service on the store
	// (NewService refuses a store whose is shorter). Zero means
	// LogRetention(DefaultMaxTTL, DefaultLeeway).
	LogRetention time.Duration
	// Leeway is the largest leeway (Options.Leeway) of the services on the
	// store: RevokeToken logs a token until three of it after its exp, when
	// it validates nowhere (NewService refuses a store whose is shorter).
	// Zero means DefaultLeeway.
	Leeway time.Duration
}

// LogRetention is how long the revocation log must keep an entry for the
// tokens of a service whose longest lifetime is maxTTL and leeway leeway:
// three leeways more than maxTTL. One because a token validates until its exp
// plus the leeway; one because a client's revocation covers the IDs of the
// leeway after it (RevokeClient), whose tokens expire that much later; one
// because the entries' IDs and the trimming floor are Redis's clock, and a
// token's exp its issuing replica's, which may be ahead of Redis's by as
// much as clocks may differ.
func LogRetention(maxTTL, leeway time.Duration) time.Duration {
	return maxTTL + 3*max(leeway, 0)
}

// NewStore returns a store on rdb. Every command goes through one batcher,
// which bounds its wait by the timeout: commands of concurrent requests
// share pipelines; see batcher.
func NewStore(rdb redis.UniversalClient, opts StoreOptions) *Store {
	if opts.Prefix == "" {
		opts.Prefix = DefaultKeyPrefix
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultStoreTimeout
	}
	if opts.LogRetention <= 0 {
		opts.LogRetention = LogRetention(DefaultMaxTTL, DefaultLeeway)
	}
	if opts.Leeway <= 0 {
		opts.Leeway = DefaultLeeway
	}
	_, cluster := rdb.(*redis.ClusterClient)
	s := &Store{rdb: rdb, cluster: cluster, prefix: opts.Prefix, readyKey: opts.Prefix + "ready:" + newMarker(),
		batch:  newBatcher(rdb, opts.Timeout, batchOverlap),
		logKey: opts.Prefix + "{revlog}", logRetention: opts.LogRetention, leeway: opts.Leeway}
	if opts.TracerProvider != nil {
		s.tracer = opts.TracerProvider.Tracer(tracerName)
		s.batch.tracer = s.tracer
	}
	return s
}

// tracerName names the spans' instrumentation scope.
const tracerName = "github.com/snowtoken/snowtoken/token"

// do runs cmd through the batcher, which waits no longer than the store's
// timeout for it: on the deadline the caller goes on, with
// context.DeadlineExceeded, while the pipeline still out ends on its own
// timeout.
func (s *Store) do(ctx context.Context, cmds ...redis.Cmder) error {
	if s.tracer == nil {
		return s.batch.do(ctx, cmds...)
	}
	ctx, span := s.tracer.Start(ctx, "redis.store "+cmdNames(cmds), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(dbSystem))
	defer span.End()
	err := s.batch.do(ctx, cmds...)
	if err != nil && !errors.Is(err, redis.Nil) {
		span.RecordError(err)
		span.SetStatus(codes.Error, "redis")
	}
	return err
}

// LogKey is the key of the revocation log, a Stream in a hash slot of its
// own ({revlog}); see the package doc.
func (s *Store) LogKey() string { return s.logKey }

// Close stops the goroutines that send batches. Call it after the last
// request; it does not close the Redis client.
func (s *Store) Close() { s.batch.close() }

// keys are the Redis keys that decide whether one token is live, and the
// time its ID carries, which the client's revocation is compared with.
type keys struct {
	session, gen, client string
	issued               int64 // Unix ms of the token's ID
}

func (s *Store) keysFor(subject, client, jti string, issued time.Time) keys {
	tag := s.prefix + "{" + subject + "}:"
	return keys{session: tag + jti, gen: tag + "gen", client: s.clientKey(client), issued: issued.UnixMilli()}
}

// clientKey is the key of client's revocation time.
func (s *Store) clientKey(client string) string { return s.prefix + "client:{" + client + "}" }

// markerLua makes sure the subject's marker, the last of KEYS, exists and
// lives at least ARGV[1] ms, and leaves it in gen. A subject with no marker
// (its first token, or every earlier token has expired, or the marker was
// lost) gets ARGV[2], a new random one: records that hold an older marker
// then no longer match, so a lost marker logs them out instead of reviving them.
const markerLua = `
local m = KEYS[#KEYS]
local gen = redis.call('GET', m)
if not gen then
  gen = ARGV[2]
  redis.call('SET', m, gen, 'PX', ARGV[1])
elseif redis.call('PTTL', m) < tonumber(ARGV[1]) then
  redis.call('PEXPIRE', m, ARGV[1])
end
`

// createLua writes the record KEYS[1] with NX, holding the subject's
// current marker (the last of KEYS) between ARGV[3] and ARGV[4] (an opaque
// token's record holds more than the marker; empty for a JWT's), and makes
// sure the marker outlives the record. It returns 1 when it wrote the
// record, 0 when one was there already. With three KEYS (a single Redis or
// Sentinel, where the client's key may be read with the subject's), it
// reads the client's revocation time KEYS[2] too and, if there is one,
// returns {1 or 0, the time}, so that Issue learns in the same round trip
// whether its new token is one the client's revocation covers (a plain
// integer when there is none, the common case, costs no more than before).
// A record written for such a token is never handed out and expires with
// its TTL: writing it first keeps the verdict in Go (revokedByClient), the
// one Check gives, on every layout.
const createLua = markerLua + `
local n = 0
if redis.call('SET', KEYS[1], ARGV[3] .. gen .. ARGV[4], 'NX', 'PX', ARGV[1]) then
  n = 1
end
if #KEYS == 3 then
  local cut = redis.call('GET', KEYS[2])
  if cut then
    return {n, cut}
  end
end
return n
`

var createScript = redis.NewScript(createLua)

// newMarker returns a subject marker no record has held: 62 random bits
// (collisions about 2^-62 per revocation), in decimal so that Redis keeps it
// as an integer. It need not be secret: it is no credential, only a value
// that must differ from every earlier one.
func newMarker() string { return strconv.FormatUint(rand.Uint64()>>2|1<<61, 10) }

// Create writes the session record of a new token for ttl. A record that
// already exists is never overwritten: ErrDuplicateID, wrapped in
// ErrUnavailable, because the Redis client sends a command again when its
// reply was lost (EOF), and then finds the record it wrote the first time:
// the caller should retry with a new ID. A token that its client's
// revocation covers (k.issued at or before the client's revocation time,
// which is ahead of the revoker's clock by the leeway) must not be handed
// out: ErrClientRevoking (clientCutoff). The client's revocation time is
// read in the same round trip: by the script on a single Redis or Sentinel
// (one command, as before), in the script's pipeline on a Cluster, where
// the client's key is in another slot (two commands, one round trip).
func (s *Store) Create(ctx context.Context, k keys, ttl time.Duration) error {
	return s.create(ctx, k, ttl, "", "")
}

// create is Create, and CreateOpaque's single Redis path, with the record's
// head and tail around the marker.
func (s *Store) create(ctx context.Context, k keys, ttl time.Duration, head, tail string) error {
	keys := []string{k.session, k.client, k.gen}
	var with redis.Cmder
	var client *redis.StringCmd // a Cluster's GET of the client's key
	if s.cluster {
		client = redis.NewStringCmd(ctx, "get", k.client)
		keys, with = []string{k.session, k.gen}, client
	}
	cmd, err := s.eval(ctx, with, createScript, createLua, keys, ttl.Milliseconds(), newMarker(), head, tail)
	if err != nil {
		return err
	}
	var n, cut any
	switch v := cmd.Val().(type) {
	case int64:
		n = v
	case []any:
		if len(v) == 2 {
			n, cut = v[0], v[1]
		}
	}
	if n == nil {
		return unavailable(fmt.Errorf("create script answered %v", cmd.Val()))
	}
	if client != nil {
		if cut, err = optional(client); err != nil {
			return err
		}
	}
	return created(n == int64(1), k.issued, cut)
}

// created is the verdict of Create and CreateOpaque on a new record:
// written says whether it was (not: ErrDuplicateID), cut is the client's
// revocation time (clientCutoff).
func created(written bool, issued int64, cut any) error {
	if !written {
		return fmt.Errorf("%w: %w", ErrUnavailable, ErrDuplicateID)
	}
	return clientCutoff(issued, cut)
}

// optional is the value of a GET, nil when the key is missing.
func optional(cmd *redis.StringCmd) (any, error) {
	switch v, err := cmd.Result(); {
	case err == nil:
		return v, nil
	case errors.Is(err, redis.Nil):
		return nil, nil
	default:
		return nil, unavailable(err)
	}
}

// clientCutoff is Create's verdict on a new token issued at issued (Unix
// ms) whose client's revocation time is client (a string, or nil): nil
// when the revocation does not cover it, else ErrClientRevoking with the
// wait until a token would be past it, or, when the time does not read
// (Check fails all the client's tokens closed), ErrUnavailable.
func clientCutoff(issued int64, client any) error {
	cutoff, revoked := revokedByClient(issued, client)
	switch {
	case !revoked:
		return nil
	case cutoff == 0:
		return unavailable(fmt.Errorf("the client's revocation time %.32q does not read", client))
	}
	return &revokingError{wait: time.Duration(cutoff-issued+1) * time.Millisecond}
}

// revokingError is ErrClientRevoking with the wait until a new token's ID
// is past the client's revocation time.
type revokingError struct{ wait time.Duration }

func (e *revokingError) Error() string {
	return fmt.Sprintf("%v: %v: a token issued now would not validate; retry in %v", ErrUnavailable, ErrClientRevoking, e.wait)
}

func (e *revokingError) Unwrap() []error { return []error{ErrUnavailable, ErrClientRevoking} }

// RetryAfter is how long until a token issued is past the revocation.
func (e *revokingError) RetryAfter() time.Duration { return e.wait }

// Check returns nil when the record exists and holds the subject's current
// marker, and the token's client was not revoked after it was issued;
// ErrRevoked when the record is gone, when it holds an older marker (the
// subject was revoked), when the subject's marker is missing (it was lost:
// evicted, or a failover or restart that did not keep it, so whether the
// subject was revoked cannot be known: fail closed), and when the client was
// revoked at or after the token's time; ErrUnavailable when Redis does not
// answer. It is one MGET of the three keys, or on a Cluster (where the
// client's key is in another slot) an MGET and a GET in one pipeline.
func (s *Store) Check(ctx context.Context, k keys) error {
	var vals []any
	if s.cluster {
		cmd, client := redis.NewSliceCmd(ctx, "mget", k.session, k.gen), redis.NewStringCmd(ctx, "get", k.client)
		if err := s.do(ctx, cmd, client); err != nil && !errors.Is(err, redis.Nil) {
			return unavailable(err)
		}
		vals = append(cmd.Val(), nil)
		if v, err := client.Result(); err == nil {
			vals[2] = v
		}
	} else {
		cmd := redis.NewSliceCmd(ctx, "mget", k.session, k.gen, k.client)
		if err := s.do(ctx, cmd); err != nil {
			return unavailable(err)
		}
		vals = cmd.Val()
	}
	return live(k.issued, vals[0], vals[1], vals[2])
}

// live is Check's verdict on what Redis holds for a token issued at issued
// (Unix ms): the marker its record holds, the subject's marker and the
// client's revocation time, each a string, or nil for a missing key.
func live(issued int64, rec, gen, client any) error {
	if _, revoked := revokedByClient(issued, client); revoked {
		return fmt.Errorf("%w: all tokens of the client were revoked", ErrRevoked)
	}
	r, ok := rec.(string)
	if !ok {
		return fmt.Errorf("%w: no session", ErrRevoked)
	}
	g, ok := gen.(string)
	switch {
	case !ok:
		// A client hears what the others hear of a session that is gone.
		return Describe(fmt.Errorf("%w: %w", ErrRevoked, ErrMarkerLost), "no session")
	case r != g:
		return fmt.Errorf("%w: all tokens of the subject were revoked", ErrRevoked)
	}
	return nil
}

// revokedByClient reports whether the client's revocation time client (a
// string of Unix ms, or nil for none) covers a token issued at issued (Unix
// ms), and the time; a time that does not read covers every token (fail
// closed), with cutoff 0.
func revokedByClient(issued int64, client any) (cutoff int64, revoked bool) {
	v, ok := client.(string)
	if !ok {
		return 0, false
	}
	cutoff, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, true
	}
	return cutoff, issued <= cutoff
}

// Kinds of revocation log entries (the k field; see the package doc).
const (
	logToken   = "t" // i: the jti; v: the token's exp, Unix s ("" if unknown)
	logSubject = "s" // i: the subject; v: its new marker
	logClient  = "c" // i: the client; v: its revocation time, Unix ms
)

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
// a marker has no token that passes Check, but a validator that decides
// from the log never read the marker, and must hear of the revocation.
const revokeSubjectLua = revokeLua + `
return revoke(false, function() redis.call('SET', KEYS[1], ARGV[4], 'XX', 'KEEPTTL') end)
`

// revokeClientLua raises KEYS[1] to ARGV[4] and logs it; nothing when it
// holds that time or a later one already: a client's revocation time never
// moves back, and the entry that raised it to that time is in the log. A
// time that does not read fails the script (Check fails the client's
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

// seenKey is the dedupe key of the revocation of the token jti: it exists
// while the log holds the token's entry and the token may still validate.
func (s *Store) seenKey(jti string) string { return s.logKey + ":r:" + jti }

// RevokeToken removes the record key of the token jti, whose exp (Unix s)
// is exp (0: unknown), and logs it, whether or not the record exists: a
// validator that decides from the log accepts a token whose record is gone
// (evicted, lost) until the log revokes it. It logs a token once: the
// dedupe key (seenKey) lives until three leeways (StoreOptions.Leeway)
// after exp, by Redis's clock, when the token validates nowhere (at most
// the log's retention: the entry outlives it); a token past that time is
// not logged. A missing record is not an error. On a single Redis or
// Sentinel it is one script; on a Cluster, where the log and its dedupe
// keys are in a slot of their own ({revlog}), the entry's script and then
// a DEL of the record: two round trips, the record's write only once the
// entry is acknowledged (see revoke).
func (s *Store) RevokeToken(ctx context.Context, key, jti string, exp int64) error {
	v := ""
	if exp > 0 {
		v = strconv.FormatInt(exp, 10)
	}
	args := []any{strconv.FormatInt(s.logRetention.Milliseconds(), 10), logToken, jti, v,
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
		strconv.FormatInt(s.logRetention.Milliseconds(), 10), logToken, jti, v)
	return err
}

// RevokeSubject makes every live token of subject fail Check, in O(1): it
// gives the subject a new marker, which no record holds, and keeps the
// marker's TTL, which Create has made at least as long as the longest record
// of the subject. A subject without a marker has no token that passes Check,
// and gets none; the revocation is logged all the same, every time (a new
// marker each time).
func (s *Store) RevokeSubject(ctx context.Context, subject string) error {
	k := s.keysFor(subject, "", "", time.Time{})
	return s.revoke(ctx, revokeSubjectScript, revokeSubjectLua, k.gen, logSubject, subject, newMarker(), false)
}

// RevokeClient makes every token of client whose ID's time is at or before
// before fail Check, in O(1): one key with no TTL, which holds the latest
// such time. It has no TTL because a lost key would revive the tokens, and
// clients are few (the clients file lists them); no maxmemory-policy the
// service accepts evicts a key without a TTL (package redisconf). A time
// that does not raise the key's logs nothing: the entry that raised it
// covers every token this one would.
func (s *Store) RevokeClient(ctx context.Context, client string, before time.Time) error {
	if err := checkName(client); err != nil {
		return fmt.Errorf("%w: client: %w", ErrInvalidRequest, err)
	}
	return s.revoke(ctx, revokeClientScript, revokeClientLua, s.clientKey(client), logClient, client,
		strconv.FormatInt(before.UnixMilli(), 10), true)
}

// revoke runs the revocation script sc on key with the log entry kind, id,
// v. On a single Redis or Sentinel the script writes the key and the log
// entry in one atomic step: both or neither. On a Cluster the log is in a
// slot of its own, which a script on key may not touch: the entry is
// appended first, in a round trip of its own, and the script runs only once
// Redis has acknowledged it. Either failing is ErrUnavailable, so a
// revocation that returns nil has both. A script that fails after the entry
// leaves an entry for a revocation that did not happen: a reader of the log
// then refuses a token Redis still holds valid (closed, and the caller, told
// ErrUnavailable, revokes again). The other order would leave a revocation
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

// evalInt runs a script that returns an integer; see eval.
func (s *Store) evalInt(ctx context.Context, sc *redis.Script, src string, keys []string, args ...any) (int64, error) {
	cmd, err := s.eval(ctx, nil, sc, src, keys, args...)
	if err != nil {
		return 0, err
	}
	return cmd.Int64()
}

// eval runs a script through the batcher by its SHA, and by its source
// when Redis does not have it (restarted, or SCRIPT FLUSH), with also, if
// it is not nil, the command with in the same pipeline (its result is in
// it). A nil reply is redis.Nil, unwrapped; any other failure wraps
// ErrUnavailable.
func (s *Store) eval(ctx context.Context, with redis.Cmder, sc *redis.Script, src string, keys []string, args ...any) (*redis.Cmd, error) {
	argv := make([]any, 0, 3+len(keys)+len(args))
	argv = append(argv, "evalsha", sc.Hash(), len(keys))
	for _, k := range keys {
		argv = append(argv, k)
	}
	argv = append(argv, args...)
	send := func(cmd *redis.Cmd) error {
		if with == nil {
			return s.do(ctx, cmd)
		}
		// The pipeline's error may be with's (a GET's redis.Nil).
		if err := s.do(ctx, cmd, with); err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		return cmd.Err()
	}
	cmd := redis.NewCmd(ctx, argv...)
	err := send(cmd)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") { // HasErrorPrefix allocates, even for nil
		argv[0], argv[1] = "eval", src
		cmd = redis.NewCmd(ctx, argv...)
		err = send(cmd)
	}
	switch {
	case errors.Is(err, redis.Nil):
		return cmd, redis.Nil
	case err != nil:
		return nil, unavailable(err)
	}
	return cmd, nil
}

// Ready checks that Redis answers and accepts writes: one SET of a key of
// this store's own with a short TTL. A Redis that is full (OOM under
// noeviction), a read-only replica after a failover (READONLY), or one that
// stops writes after a failed snapshot (MISCONF) answers reads but not
// Create or RevokeSubject, so a replica on it is not ready.
func (s *Store) Ready(ctx context.Context) error {
	if err := s.do(ctx, redis.NewStatusCmd(ctx, "set", s.readyKey, "1", "px", time.Minute.Milliseconds())); err != nil {
		return unavailable(err)
	}
	return nil
}

// unavailable wraps a Redis failure.
func unavailable(err error) error {
	return fmt.Errorf("%w: redis: %w", ErrUnavailable, err)
}
