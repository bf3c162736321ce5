package redisstore

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

	"github.com/snowtoken/snowtoken/token"
)

// Errors of a Store, besides token's (token.ErrUnavailable wraps every
// failure of Redis).
var (
	errStoreClosed = errors.New("redisstore: session store closed")
	// errForeignHandle is a token.SessionHandle that this store did not
	// make: Session reads nothing on it (fail closed).
	errForeignHandle = errors.New("redisstore: a session handle of another store")
	// ErrOptions is a negative option, which New returns.
	ErrOptions = errors.New("redisstore: bad options")
)

// Store is a token.Store.
var _ token.Store = (*Store)(nil)

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
	// entries stay (Options.LogRetention), by Redis's clock.
	logKey       string
	logRetention time.Duration
	leeway       time.Duration // Options.Leeway
}

// DefaultTimeout bounds every call of a Store when Options says nothing.
const DefaultTimeout = 2 * time.Second

// Options configures a Store. Zero values mean the documented defaults.
type Options struct {
	// Prefix starts every key. Empty means DefaultKeyPrefix.
	Prefix string
	// Timeout bounds every call, whatever Redis does (frozen, a half-open
	// connection, a slow script): the call returns token.ErrUnavailable by then.
	// Zero means DefaultTimeout.
	Timeout time.Duration
	// TracerProvider, if set, records a span for each call, a child of the
	// request's, and one for each pipeline; see package tracing. Nil: none,
	// at no cost.
	TracerProvider trace.TracerProvider
	// LogRetention is how long an entry of the revocation log stays: every
	// revocation appends one, and trims those older than this. It must be at
	// least LogRetention(MaxTTL, Leeway) of every Service on the store
	// (token.NewService refuses a store whose is shorter). Zero means
	// token.LogRetention(token.DefaultMaxTTL, token.DefaultLeeway).
	LogRetention time.Duration
	// Leeway is the largest leeway (Options.Leeway) of the services on the
	// store: RevokeToken logs a token until three of it after its exp, when
	// it validates nowhere (token.NewService refuses a store whose is shorter).
	// Zero means token.DefaultLeeway.
	Leeway time.Duration
	// ClusterPaths takes a Cluster's paths (every script within one slot,
	// a round trip more where a step spans slots) on any Redis, as a
	// *redis.ClusterClient always does: the tests of those paths run on
	// one Redis. False means: a Cluster's paths on a Cluster only.
	ClusterPaths bool
}

// Check returns ErrOptions, naming the option, if a duration is negative:
// zero is the default, and no option has a negative meaning.
func (o Options) Check() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Timeout", o.Timeout}, {"LogRetention", o.LogRetention}, {"Leeway", o.Leeway}} {
		if d.v < 0 {
			return fmt.Errorf("%w: %s %v is negative: zero means the default", ErrOptions, d.name, d.v)
		}
	}
	return nil
}

// New returns a store on rdb. Every command goes through one batcher,
// which bounds its wait by the timeout: commands of concurrent requests
// share pipelines; see batcher. A negative option is ErrOptions
// (Options.Check).
func New(rdb redis.UniversalClient, opts Options) (*Store, error) {
	if err := opts.Check(); err != nil {
		return nil, err
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultKeyPrefix
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.LogRetention == 0 {
		opts.LogRetention = token.LogRetention(token.DefaultMaxTTL, token.DefaultLeeway)
	}
	if opts.Leeway == 0 {
		opts.Leeway = token.DefaultLeeway
	}
	_, cluster := rdb.(*redis.ClusterClient)
	cluster = cluster || opts.ClusterPaths
	s := &Store{rdb: rdb, cluster: cluster, prefix: opts.Prefix, readyKey: opts.Prefix + "ready:" + newMarker(),
		batch:  newBatcher(rdb, opts.Timeout, batchOverlap),
		logKey: opts.Prefix + "{revlog}", logRetention: opts.LogRetention, leeway: opts.Leeway}
	if opts.TracerProvider != nil {
		s.tracer = opts.TracerProvider.Tracer(tracerName)
		s.batch.tracer = s.tracer
	}
	return s, nil
}

// tracerName names the spans' instrumentation scope: package token's, as
// before the store had a package of its own, so that what reads the spans
// finds them where it did.
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

// ClusterPaths reports whether the store takes a Cluster's paths: on a
// Cluster, or by Options.ClusterPaths.
func (s *Store) ClusterPaths() bool { return s.cluster }

// LogRetention is how long the revocation log keeps an entry (Options.LogRetention).
func (s *Store) LogRetention() time.Duration { return s.logRetention }

// Leeway is the largest leeway of the services on the store (Options.Leeway).
func (s *Store) Leeway() time.Duration { return s.leeway }

// clientKey is the key of client's revocation time.
func (s *Store) clientKey(client string) string { return s.keys("", client, "").client }

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
// its TTL: writing it first keeps the verdict in Go (token.SessionCreated), the
// one token.SessionLive gives on a Session read, on every layout.
// The record lives ARGV[5] ms, the marker at least ARGV[1]: markerTTL's
// margin more (see markerMargin).
const createLua = markerLua + `
local n = 0
if redis.call('SET', KEYS[1], ARGV[3] .. gen .. ARGV[4], 'NX', 'PX', ARGV[5]) then
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

// markerMargin is how much longer than a new record its subject's marker
// is made to live. Redis reads its clock for each command of a script, so
// a record set in the same script as its marker's PEXPIRE may expire a
// millisecond after it; on a Cluster (CreateOpaque) the record is written a
// round trip later. A marker that expired first would read the record's
// last moments as revoked. A marker that outlives its last record by the
// margin costs one key for a minute.
const markerMargin = time.Minute

// markerTTL is the marker's TTL, in ms, for a record of ttl.
func markerTTL(ttl time.Duration) int64 { return (ttl + markerMargin).Milliseconds() }

// newMarker returns a subject marker no record has held: 62 random bits
// (collisions about 2^-62 per revocation), in decimal so that Redis keeps it
// as an integer. It need not be secret: it is no credential, only a value
// that must differ from every earlier one.
func newMarker() string { return strconv.FormatUint(rand.Uint64()>>2|1<<61, 10) }

// Create writes the session record of a new token for ttl. A record that
// already exists is never overwritten: token.ErrDuplicateID, wrapped in
// token.ErrUnavailable, because the Redis client sends a command again when its
// reply was lost (EOF), and then finds the record it wrote the first time:
// the caller should retry with a new ID. A token that its client's
// revocation covers (k.Issued at or before the client's revocation time,
// which is ahead of the revoker's clock by the leeway) must not be handed
// out: token.ErrClientRevoking (clientCutoff). The client's revocation time is
// read in the same round trip: by the script on a single Redis or Sentinel
// (one command, as before), in the script's pipeline on a Cluster, where
// the client's key is in another slot (two commands, one round trip).
func (s *Store) Create(ctx context.Context, ref token.SessionRef, ttl time.Duration) error {
	return s.create(ctx, s.keys(ref.Subject, ref.Client, ref.JTI), ref.Issued, ttl, "", "")
}

// create is Create, and CreateOpaque's single Redis path, with the record's
// head and tail around the marker, for a token whose ID's time is issued.
func (s *Store) create(ctx context.Context, k sessionKeys, issued time.Time, ttl time.Duration, head, tail string) error {
	keys := []string{k.record, k.client, k.gen}
	var with redis.Cmder
	var client *redis.StringCmd // a Cluster's GET of the client's key
	if s.cluster {
		client = redis.NewStringCmd(ctx, "get", k.client)
		keys, with = []string{k.record, k.gen}, client
	}
	cmd, err := s.eval(ctx, with, createScript, createLua, keys, markerTTL(ttl), newMarker(), head, tail, ttl.Milliseconds())
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
	return token.SessionCreated(n == int64(1), issued.UnixMilli(), cutoff(cut))
}

// text is a reply that is a string, or "" for a missing key (nil).
func text(v any) string {
	s, _ := v.(string)
	return s
}

// cutoff reads a client's revocation time as a reply holds it, a string of
// Unix ms or nil for none, as token.Session.ClientCutoff: zero for none,
// token.CutoffUnreadable for a value that does not read.
func cutoff(v any) int64 {
	s, ok := v.(string)
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return token.CutoffUnreadable
	}
	return n
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
// token.ErrUnavailable.
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
	return fmt.Errorf("%w: redis: %w", token.ErrUnavailable, err)
}
