// Package revlog follows the revocation log (redisstore.Store.LogKey) so that a
// replica knows in memory what is revoked, and knows whether that knowledge
// is fresh enough to decide on: a *Follower is the token.Revocations that
// validation asks before it reads Redis, and the Source the revocation feed
// (package revfeed) serves to consumers.
//
// # Redis keys
//
// With the store's default prefix "st:" (every key in the {revlog} slot, so
// that every script touches one Cluster slot):
//
//	st:{revlog}         Stream {k, i, v}         no TTL   the revocation log (package token writes it)
//	st:{revlog}:hb      Stream {e, l, n}         no TTL   heartbeats, XADD MAXLEN ~ HeartbeatMaxLen
//	st:{revlog}:epoch   "<32 hex>.<Unix ms>"     no TTL   the Redis epoch and when it began (the horizon):
//	                                                      set, if absent, by the heartbeat and snapshot
//	                                                      scripts, on Redis's clock (TIME)
//	st:{revlog}:writer  string, owner (32 hex)   PX 4 periods  which Writer heartbeats
//
// A heartbeat entry carries, read in the one script that appends it:
//
//	e = the epoch        l = the log's last-generated-id        n = the log's entries-added
//
// (XINFO STREAM: Redis 7.0 or later, which the scripts check; on an older
// Redis they fail, followers stay stale and every validation reads Redis).
// Heartbeats are a stream of their own so that the revocation log grows only
// with revocations: the heartbeat stream holds about HeartbeatMaxLen entries
// (plus at most one listpack node, stream-node-max-entries, that "~" keeps),
// a few kB however long the service runs.
//
// What happens when a key disappears or goes back:
//
//	epoch lost  (FLUSHALL, restart without   the next heartbeat or snapshot sets a new one, with a new
//	  persistence)                           horizon: every follower resyncs (reason epoch)
//	entries lost, epoch kept (a failover to  a follower that had applied them finds the log behind its
//	  a replica that lacked them, an AOF     state (fewer entries added, or an earlier last ID: at a
//	  everysec crash, the log deleted)       resync, a heartbeat, or a quiet read) and rotates the epoch
//	                                         (reason loss): every follower resyncs with a new horizon
//	hb lost                                  followers' XREAD waits on a new stream; quiet until the
//	                                         next heartbeat, whose epoch, if new, makes them resync
//	writer lost (expiry: its holder stopped) the next Writer to beat takes it over: heartbeats pause for
//	                                         up to 4 periods and followers may go stale meanwhile
//
// A follower never forgets at a resync what it knew before: the state it
// had is merged into the new one (a revocation is never undone). A
// follower that finds a loss first writes again what it applied that the
// log lost (Options.Redo: serve revokes again through token.Store), then
// rotates the epoch, so that every other replica hears of it too. A token
// issued before the epoch began (plus the leeway, the bound on clock skew
// the service already has) is never decided from the log, only by Redis's
// records, as before the log existed (Redis's data-loss rules, docs/redis.md). Not
// detected: entries lost before any follower read them (a crash within
// the milliseconds between Redis's acknowledgement and the followers'
// reads: the records lost the same writes), a loss while every replica
// was down, an entry deleted by hand (XDEL). The guarantee therefore
// assumes a Redis that loses no acknowledged write: appendfsync always,
// and min-replicas-to-write with failover (docs/revocation.md).
//
// What the log says is held in the revocation core's State (package
// client/revocation: no I/O), which holds the rules too; this package is
// its reader from Redis:
//
//	revlog.go    the keys, the scripts that read the epoch and rotate it, stream IDs
//	follower.go  Options, Follower, its state (the core's State and Ring, the read positions), Run
//	read.go      XREAD BLOCK: entries applied, heartbeats checked, a quiet read
//	resync.go    the full read, the merge into the state in force, redo after a loss
//	fresh.go     Fresh and Heard
//	decide.go    token.Revocations and token.LocalRevocations, handed to the core
//	local.go     Local: a log of one replica's own revocations, in process, no Redis (dev mode)
//	feed.go      the feed's Source: Status, Since, Snapshot
//	writer.go    the heartbeat Writer
//	metrics.go   the follower's metrics
//
// # Deciding (token.Revocations)
//
// Decide answers (the core's revocation.State.DecideLog), only while Fresh: LogRevoked for a jti with an entry or
// a token at or before its client's cutoff; LogLive when the subject has
// no entry and the token was issued after the horizon and the leeway, or
// when a Redis check marked (Mark) in the current state found it live and
// no entry of its subject came since; LogUnknown otherwise (read Redis). A
// mark grows with every entry applied and jumps at every full read, so a
// check made before a resync vouches for nothing after it.
//
// # One writer
//
// Every replica runs a Writer; the heartbeat script itself elects one: it
// writes a heartbeat only when the writer key is absent or holds its owner
// token, and then sets the key to that token with PX 4 periods. So a
// heartbeat costs its holder one EVALSHA per period (six commands in
// INFO commandstats: the script and GET, SET, GET, XINFO, XADD in it). A
// Writer that does not hold the key runs nothing while its replica's
// follower hears heartbeats (WriterOptions.Heard); after two periods
// without one it runs the script every period, and takes the key over
// once it expires. Two writers for a moment (a
// holder paused past its key's TTL) are harmless: a heartbeat says only what
// Redis held when the script ran.
//
// # Lifecycle of a Follower
//
//	start / resync ──▶ snapshot script (epoch, log's last ID and entries-added, hb's last ID)
//	               ──▶ XRANGE the log up to that last ID, in pages ──▶ state swapped in, the old merged
//	               ──▶ XREAD BLOCK [COUNT page] on log and hb from the last IDs applied ──▶ apply ──┐
//	                        ▲──────────────────────────────────────────────────────────────────┘
//	resync when: a heartbeat's epoch differs from the snapshot's (epoch); its l is later than the
//	last entry applied (unapplied: an entry was removed before we read it); the entries counted
//	since the last heartbeat are fewer than its n (trimmed: some were removed unread), or more, or
//	its l is before what was read (loss); after unapplied, trimmed and loss the follower rotates
//	the epoch first, since it cannot know what it missed; a read fails (error: connection
//	killed, timeout, Redis down); more than 65,536 entries without a heartbeat (backlog). A read
//	that brings nothing for BlockTimeout (no writer) runs the snapshot script instead: a new epoch
//	resyncs (epoch), fewer entries added (loss), a stream whose last ID is behind the follower's
//	(a Redis back with its clock behind) too (quiet); else it reads on.
//
// # Freshness
//
// One XREAD reply is one snapshot of both streams, and it holds every log
// entry after the last one applied (unless it is a full page, in which case
// its heartbeats are left for the next read). So once a reply is applied,
// the state holds every entry appended before Redis built the reply. A
// heartbeat in it was appended after the previous reply that left none
// unread was built, hence after that previous read was sent: that send
// time is the heartbeat's stamp, and Fresh(now) is true only while:
//
//	now - the stamp < Threshold (the follower's own monotonic clock; never the writer's or Redis's)
//	the heartbeat's epoch is the state's, its l is applied, its n matches the count (else: resync)
//
// Stamping with the read that brought the heartbeat instead would let a
// heartbeat written long ago (before a failover, on a Redis no writer
// writes to any more) make an old state look new. Hence the rule: a
// revocation whose entry Redis acknowledged at t is in the state of every
// follower that reports Fresh at any time after t + Threshold
// (TestFreshNeverMissesAnEntry), or the loss of it was detected as above.
//
// # The feed (Since, Changed, Status, Snapshot)
//
// Every entry applied is also an Event (revocation.Event) whose ID is the
// epoch and the entry's stream ID; the latest 4,096 at least are kept (a
// revocation.Ring), so a consumer that
// lost its connection resumes from its last ID (Since) unless the epoch
// changed or it fell further behind, and then starts from a Snapshot.
// Changed wakes the feed's writers at every entry, heartbeat and resync.
//
// # Cost
//
// The writer: one EVALSHA a period on the holder. The follower: one XREAD
// a heartbeat, and a paged XRANGE of the whole log per resync; in memory
// about 60 B a revoked token, forgotten after its exp and Leeway, subjects
// and clients after the retention (a scan of the maps at most once a
// second), and the recent events for the feed (about 8,192 at most).
// docs/redis.md gives the figures.
package revlog

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/client/revocation"
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

// infoLua reads the epoch of KEYS[3] (setting it to ARGV[1], a "." and
// Redis's time in ms, when absent or not of that form) and the
// last-generated-id and entries-added of the log KEYS[1]. A log without
// entries-added (Redis before 7.0) is an error: without it, entries removed
// before a follower read them cannot be told from none.
const infoLua = `
local e = redis.call('GET', KEYS[3])
if not e or not string.find(e, '.', 1, true) then
  local t = redis.call('TIME')
  e = ARGV[1] .. '.' .. string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  redis.call('SET', KEYS[3], e)
end
local last, n = '0-0', 0
local info = redis.pcall('XINFO', 'STREAM', KEYS[1])
if info.err == nil then
  n = nil
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then last = info[i + 1]
    elseif info[i] == 'entries-added' then n = info[i + 1] end
  end
  if n == nil then
    return redis.error_reply('revlog: XINFO STREAM has no entries-added: the revocation log needs Redis 7.0 or later')
  end
end
`

// rotateScript, with KEYS epoch and ARGV the epoch seen and a new token,
// replaces the epoch with a new one (the token, a "." and Redis's time)
// if it is still the one seen: a follower that found entries lost makes
// every follower resync, and moves the horizon, once.
var rotateScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local t = redis.call('TIME')
redis.call('SET', KEYS[1], ARGV[2] .. '.' .. string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)))
return 1
`)

// horizonOf is the time an epoch began, Unix ms (the part after its "."),
// or an error.
func horizonOf(epoch string) (int64, error) {
	_, ms, ok := strings.Cut(epoch, ".")
	h, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil || h <= 0 {
		return 0, fmt.Errorf("%w: epoch %.64q", ErrEntry, epoch)
	}
	return h, nil
}

// parseID parses a stream entry ID (revocation.ParseStreamID), an
// ErrEntry when it does not.
func parseID(s string) (revocation.StreamID, error) {
	id, err := revocation.ParseStreamID(s)
	if err != nil {
		return id, fmt.Errorf("%w: %w", ErrEntry, err)
	}
	return id, nil
}

// newToken is 32 random hex digits: an epoch or a writer's owner token.
func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
