// Package revlog follows the revocation log (token.Store.LogKey) so that a
// replica knows in memory what is revoked, and knows whether that knowledge
// is fresh enough to decide on. Nothing uses it yet: validation still reads
// the records in Redis.
//
// # Redis keys
//
// With the store's default prefix "st:" (every key in the {revlog} slot, so
// that every script touches one Cluster slot):
//
//	st:{revlog}         Stream {k, i, v}         no TTL   the revocation log (package token writes it)
//	st:{revlog}:hb      Stream {e, l, n}         no TTL   heartbeats, XADD MAXLEN ~ HeartbeatMaxLen
//	st:{revlog}:epoch   string, 32 hex digits    no TTL   the Redis epoch: set, if absent, to a random
//	                                                      value by the heartbeat and snapshot scripts
//	st:{revlog}:writer  string, owner (32 hex)   PX 4 periods  which Writer heartbeats
//
// A heartbeat entry carries, read in the one script that appends it:
//
//	e = the epoch        l = the log's last-generated-id        n = the log's entries-added
//
// (XINFO STREAM, Redis 7.0 or later; "0-0" and 0 when there is no log).
// Heartbeats are a stream of their own so that the revocation log grows only
// with revocations: the heartbeat stream holds about HeartbeatMaxLen entries
// (plus at most one listpack node, stream-node-max-entries, that "~" keeps),
// a few kB however long the service runs.
//
// What happens when a key disappears:
//
//	log lost alone (DEL by hand)               its entries-added and last ID no longer match what the
//	                                           followers applied: each resyncs (reason trimmed/unapplied)
//	hb lost                                    followers' XREAD waits on a new stream; quiet until the
//	                                           next heartbeat, whose epoch, if new, makes them resync
//	epoch lost  (FLUSHALL, restart)            the next heartbeat or snapshot sets a new random value: every
//	                                           follower resyncs (reason epoch) and rebuilds its state from
//	                                           what the log holds then; issue 11's data-loss rules apply
//	entries lost (a failover to a replica      NOT YET DETECTED: a resync rebuilds the state from what the
//	  that lacked them; the epoch survives)    log holds and goes Fresh without them (see Known gaps)
//	writer lost (expiry: its holder stopped)   the next Writer to beat takes it over: heartbeats pause for
//	                                           up to 4 periods and followers may go stale meanwhile
//
// # One writer
//
// Every replica runs a Writer; the heartbeat script itself elects one: it
// writes a heartbeat only when the writer key is absent or holds its owner
// token, and then sets the key to that token with PX 4 periods. So a
// heartbeat costs its holder one EVALSHA per period, and every other replica
// one EVALSHA per period that writes nothing. Two writers for a moment (a
// holder paused past its key's TTL) are harmless: a heartbeat says only what
// Redis held when the script ran.
//
// # Lifecycle of a Follower
//
//	start / resync ──▶ snapshot script (epoch, log's last ID and entries-added, hb's last ID)
//	               ──▶ XRANGE the log up to that last ID, in pages ──▶ state swapped in
//	               ──▶ XREAD BLOCK [COUNT page] on log and hb from the last IDs applied ──▶ apply ──┐
//	                        ▲──────────────────────────────────────────────────────────────────┘
//	resync when: a heartbeat's epoch differs from the snapshot's (epoch); its l is later than the
//	last entry applied (unapplied: an entry was removed before we read it); the entries counted
//	since the last heartbeat differ from its n (trimmed: some were removed unread); a read fails
//	(error: connection killed, timeout, Redis down). A read that brings nothing for BlockTimeout
//	(no writer) runs the snapshot script instead: a new epoch resyncs (epoch), a stream whose last
//	ID is behind the follower's (a Redis back with its clock behind) too (quiet); else it reads on.
//
// # Freshness
//
// One XREAD reply is one snapshot of both streams, and it holds every log
// entry after the last one applied (unless it is a full page, in which case
// its heartbeats are left for the next read). So once a reply is applied,
// the state holds every entry appended before Redis built the reply, which
// is after the follower sent the read. Fresh(now) is true only while:
//
//	the last accepted heartbeat came in a reply to a read sent less than Threshold before now
//	    (the follower's own monotonic clock; never the writer's or Redis's clock)
//	its epoch is the snapshot's, its l is applied, its n matches the count (else: resync)
//
// Hence the rule, as long as no entry is removed before a follower reads it
// (see Known gaps): a revocation whose entry Redis acknowledged at t is in
// the state of every follower that reports Fresh at any time after
// t + Threshold (TestFreshNeverMissesAnEntry). The heartbeat's age is measured from when
// the read was sent, not received: never later than when Redis built the
// reply, so a reply delayed in flight or a follower that was paused cannot
// make an old state look new, and no clock but the follower's is read.
//
// # Known gaps (validation must not trust a Follower until they are closed)
//
// A second review found ways in which Fresh can be true while an
// acknowledged entry is missing. They are the next step's work, before any
// validation decides from the state:
//
//   - Entries lost with the epoch intact (a Sentinel failover to a replica
//     that lacked them, a Cluster failover of the log's master, an AOF
//     everysec crash): a resync must compare the new log's last ID and
//     entries-added with what it had applied, treat a step back as data
//     loss (keep the old state's unexpired entries, rotate the epoch), and
//     applyHeartbeat must treat n behind the count as loss, not trimming.
//   - Freshness is stamped with the send time of the read that brought a
//     heartbeat, which may be older than that read: it must be stamped with
//     the send time of the previous read whose reply was not a full page.
//   - A revoke of a token whose record is already gone (evicted, lost)
//     appends no entry (token.Store's scripts log only real changes): the
//     log must record every revocation of a correctly signed, unexpired
//     token, deduplicated by a key of its own rather than by the record.
//   - The subjects and clients maps are never pruned, and the entries read
//     between two heartbeats are not bounded while no heartbeat comes.
//   - Leeway and Retention default to this package's constants, not the
//     service's settings; a mismatch must be refused.
//
// # Cost
//
// The writer: one EVALSHA a period on every replica. The follower: one XREAD
// a heartbeat, and a paged XRANGE of the whole log per resync; in memory
// about 60 B a revoked token, forgotten after its exp and Leeway (a scan of
// the map at most once a second). docs/redis.md gives the figures.
package revlog

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Defaults for the zero values of Options and WriterOptions.
const (
	DefaultPeriod          = 25 * time.Millisecond
	DefaultThreshold       = 100 * time.Millisecond
	DefaultBlockTimeout    = time.Second
	DefaultHeartbeatMaxLen = 64
	// pageSize is the COUNT of every XRANGE and XREAD of the log.
	pageSize = 1000
)

var (
	// ErrOptions: an option is out of range.
	ErrOptions = errors.New("revlog: invalid options")
	// ErrEntry: a log or heartbeat entry that does not parse.
	ErrEntry = errors.New("revlog: malformed entry")
)

// keys are the Redis keys of one log.
type keys struct{ log, hb, epoch, writer string }

func keysFor(logKey string) keys {
	return keys{log: logKey, hb: logKey + ":hb", epoch: logKey + ":epoch", writer: logKey + ":writer"}
}

// infoLua reads the epoch of KEYS[3] (setting it to ARGV[1] when absent)
// and the last-generated-id and entries-added of the log KEYS[1].
const infoLua = `
local e = redis.call('GET', KEYS[3])
if not e then
  redis.call('SET', KEYS[3], ARGV[1])
  e = ARGV[1]
end
local last, n = '0-0', 0
if redis.call('EXISTS', KEYS[1]) == 1 then
  local info = redis.call('XINFO', 'STREAM', KEYS[1])
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then last = info[i + 1]
    elseif info[i] == 'entries-added' then n = info[i + 1] end
  end
end
`

// streamID is a stream entry ID, ms-seq.
type streamID struct{ ms, seq uint64 }

func parseID(s string) (streamID, error) {
	ms, seq, ok := strings.Cut(s, "-")
	a, err1 := strconv.ParseUint(ms, 10, 64)
	b, err2 := strconv.ParseUint(seq, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return streamID{}, fmt.Errorf("%w: stream id %q", ErrEntry, s)
	}
	return streamID{a, b}, nil
}

func (a streamID) less(b streamID) bool { return a.ms < b.ms || a.ms == b.ms && a.seq < b.seq }

func (a streamID) String() string { return fmt.Sprintf("%d-%d", a.ms, a.seq) }

// newToken is 32 random hex digits: an epoch or a writer's owner token.
func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
