package token

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultKeyPrefix starts every key the Store writes.
const DefaultKeyPrefix = "st:"

// Store keeps session records in Redis; see the package doc for the keys.
type Store struct {
	rdb      redis.UniversalClient
	prefix   string
	timeout  time.Duration
	readyKey string // written by Ready
	batch    *batcher
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
	return &Store{rdb: rdb, prefix: opts.Prefix, timeout: opts.Timeout, readyKey: opts.Prefix + "ready:" + newMarker(),
		batch: newBatcher(rdb, opts.Timeout, batchOverlap)}
}

// do runs cmd through the batcher and waits no longer than the store's
// timeout for it: on the deadline the caller goes on, with ErrUnavailable,
// while the pipeline still out ends on its own timeout.
func (s *Store) do(ctx context.Context, cmd redis.Cmder) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.batch.do(ctx, cmd)
}

// Close stops the goroutines that send batches. Call it after the last
// request; it does not close the Redis client.
func (s *Store) Close() { s.batch.close() }

// keys are the two Redis keys that decide whether one token is live.
type keys struct {
	session, gen string
}

func (s *Store) keysFor(subject, jti string) keys {
	tag := s.prefix + "{" + subject + "}:"
	return keys{session: tag + jti, gen: tag + "gen"}
}

// createScript writes the record with NX, holding the subject's current
// marker, and makes sure the marker outlives the record. A subject with no
// marker (its first token, or every earlier token has expired, or the marker
// was lost) gets ARGV[2], a new random one: records that hold an older marker
// then no longer match, so a lost marker logs them out instead of reviving them.
const createLua = `
local gen = redis.call('GET', KEYS[2])
if not gen then
  gen = ARGV[2]
  redis.call('SET', KEYS[2], gen, 'PX', ARGV[1])
elseif redis.call('PTTL', KEYS[2]) < tonumber(ARGV[1]) then
  redis.call('PEXPIRE', KEYS[2], ARGV[1])
end
if not redis.call('SET', KEYS[1], gen, 'NX', 'PX', ARGV[1]) then
  return 0
end
return 1
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
// the caller should retry with a new ID.
func (s *Store) Create(ctx context.Context, k keys, ttl time.Duration) error {
	marker := newMarker()
	cmd := redis.NewIntCmd(ctx, "evalsha", createScript.Hash(), 2, k.session, k.gen, ttl.Milliseconds(), marker)
	err := s.do(ctx, cmd)
	n := cmd.Val()
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		// Redis restarted or flushed its scripts: EVAL loads it again.
		eval := redis.NewIntCmd(ctx, "eval", createLua, 2, k.session, k.gen, ttl.Milliseconds(), marker)
		err = s.do(ctx, eval)
		n = eval.Val()
	}
	if err != nil {
		return unavailable(err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %w", ErrUnavailable, ErrDuplicateID)
	}
	return nil
}

// Check returns nil when the record exists and holds the subject's current
// marker; ErrRevoked when the record is gone, when it holds an older marker
// (the subject was revoked), and when the subject's marker is missing (it was
// lost: evicted, or a failover or restart that did not keep it, so whether
// the subject was revoked cannot be known: fail closed); ErrUnavailable when
// Redis does not answer. It is one MGET.
func (s *Store) Check(ctx context.Context, k keys) error {
	cmd := redis.NewSliceCmd(ctx, "mget", k.session, k.gen)
	if err := s.do(ctx, cmd); err != nil {
		return unavailable(err)
	}
	vals := cmd.Val()
	rec, ok := vals[0].(string)
	if !ok {
		return fmt.Errorf("%w: no session", ErrRevoked)
	}
	gen, ok := vals[1].(string)
	switch {
	case !ok:
		return fmt.Errorf("%w: %w", ErrRevoked, ErrMarkerLost)
	case rec != gen:
		return fmt.Errorf("%w: all tokens of the subject were revoked", ErrRevoked)
	}
	return nil
}

// Delete removes one record. Deleting a missing record is not an error.
func (s *Store) Delete(ctx context.Context, k keys) error {
	if err := s.do(ctx, redis.NewIntCmd(ctx, "del", k.session)); err != nil {
		return unavailable(err)
	}
	return nil
}

// RevokeSubject makes every live token of subject fail Check, in O(1): it
// gives the subject a new marker, which no record holds, and keeps the
// marker's TTL, which Create has made at least as long as the longest record
// of the subject. A subject without a marker has no token that passes Check,
// so there is nothing to do.
func (s *Store) RevokeSubject(ctx context.Context, subject string) error {
	k := s.keysFor(subject, "")
	err := s.do(ctx, redis.NewStatusCmd(ctx, "set", k.gen, newMarker(), "xx", "keepttl"))
	if err != nil && !errors.Is(err, redis.Nil) {
		return unavailable(err)
	}
	return nil
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
