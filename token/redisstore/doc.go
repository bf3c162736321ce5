// Package redisstore keeps the sessions of package token in Redis: it is
// the token.Store that a token.Service runs on. Every command goes through
// one batcher, which sends the commands of concurrent requests together
// (batch.go); the writes are Lua scripts, so that each is one atomic step.
//
// A token counts only when its signature and claims check out AND its
// session record is here. The record is what makes revocation immediate:
//
//	st:{<sub>}:<jti>  = <the subject's marker at issue>   TTL = the token's time left
//	st:{<sub>}:gen    = <the subject's marker>            TTL >= its longest record's
//	st:o:<jti>        = '1' <SHA-256 of the secret> <marker> \n <sub> \n <client_id> \n <iat> \n <exp> \n <scope> \n <aud>
//	                    ('2' and a last field, \n <jkt>, for a DPoP-bound token;
//	                    '3' and two, \n <jkt or ""> \n <act and parents, JSON>, for an exchanged one: record.go)
//	                                                      TTL = the opaque token's time left
//	st:client:{<id>}  = <Unix ms>                         no TTL: the client's tokens up to then are revoked
//	st:{revlog}       = Stream of entries {k, i, v}       no TTL; each XADD trims entries older than
//	                                                      LogRetention (MINID ~): the revocation log
//	st:{revlog}:r:<jti> = 1                             TTL: the token's exp and three leeways, at most
//	                                                      LogRetention: the token's revocation is logged
//	st:{revlog}:hb, :epoch, :writer                       the log's heartbeats, epoch and heartbeat writer:
//	                                                      package revlog, which follows the log
//	st:dpop:<id>      = 1                                 TTL: the proof's acceptance window left and the
//	                                                      leeway: an accepted DPoP proof's ID (Proofs)
//	st:assertion:<id> = 1                                 TTL: the client assertion's exp left and the
//	                                                      leeway: an accepted assertion's jti, hashed with
//	                                                      its client ID (Assertions). Gone early (evicted,
//	                                                      lost on failover): that assertion could be
//	                                                      replayed until its exp, at most a few minutes
//	st:ready:<random> = 1                                 TTL 1 min: Ready's write probe
//
// Package token speaks of none of these names or bytes: a JWT's session is
// its token.SessionRef (the keys above it names are made once per verified
// token and kept in the token.SessionHandle that Handle returns, so that a
// validation builds no key), an opaque token's record a token.OpaqueRecord,
// which this package encodes and decodes (record.go) in the layout above:
// a record an earlier release wrote reads as it did (TestOldRecordLayout).
//
// Both keys of a subject share the {<sub>} hash tag, so that the scripts that
// write them touch one Cluster slot. A token is live when its record exists
// and holds the subject's current marker, and its client was not revoked
// after the time of its ID: one MGET of the three keys on a single Redis or
// Sentinel; on a Cluster, where the client key has a slot of its own, an
// MGET and a GET in one pipeline. Issue reads the client key too, in the
// script that writes the record (in its pipeline on a Cluster), and hands
// out no token whose ID the client's revocation covers (ErrClientRevoking):
// no round trip more. An exchanged token is live only while each of its
// parents is too (token's cascade): Sessions reads the three keys of the
// token and of each parent (an opaque parent's record st:o:<jti> in place
// of a session record) in one MGET, or on a Cluster one pipeline of GETs.
//
// An opaque token carries its ID and secret only, so its record (st:o:) is
// found by the ID and names the subject and client whose keys decide the
// rest; it holds the subject's marker at issue as a JWT's record does, so
// one RevokeSubject ends the subject's tokens of both formats. On a single
// Redis or Sentinel, validating one is one script that reads the record and
// then the two keys it names (keys a script does not declare, which only a
// Cluster forbids). On a Cluster, where a script must declare its keys and
// keep to one slot, it is a GET of the record, then the marker and the
// client key in one pipeline: two round trips; and issuing one is the
// marker's script, then a SET NX of the record: two as well. Putting the
// record in its subject's slot would save that round trip only by carrying
// the subject's slot in the token, which tells which subjects a token is
// not: not done.
//
// # Lifecycle of the marker
//
//	first Issue for sub ──▶ marker = new random value, TTL = the token's
//	      Issue            ──▶ record = marker; marker TTL raised to the record's and a minute
//	      RevokeSubject    ──▶ marker = new random value, TTL kept (SET XX KEEPTTL)
//	      every record gone ──▶ the marker expires a minute after the last of them
//
// A marker is random, never a counter, so a new one never equals one that
// records already hold: revoking all of a subject's tokens is one SET,
// however many it has, and cannot be undone by a later revocation. Its
// lifetime comes from the records themselves, through Redis, never from the
// revoking replica's own settings.
//
// # The revocation log
//
// Every revocation appends one entry to st:{revlog} (Store.LogKey), a
// Redis Stream whose entry IDs are Redis's clock: a token's while it may
// still validate, a subject's every time, a client's when it raises the
// client's time. Validators that follow it (token.Options.Revocations, a
// revlog.Follower) decide on tokens from it in memory; the records above
// stay the source of truth for the others, and for what the log cannot
// tell. An entry has the same three fields, in the same order, whatever
// its kind, so that a Stream's listpack node stores the field names once
// (with its first entry) and each entry holds only its values:
//
//	k = t   i = <jti>       v = <the token's exp, Unix s>   a token (JWT or opaque); v empty if unknown
//	k = s   i = <sub>       v = <the subject's new marker>  every token of a subject
//	k = c   i = <client id> v = <Unix ms>                   every token of a client up to then
//
// Who writes it: RevokeToken and RevokeOpaque (Service.Revoke), RevokeSubject
// and RevokeClient (the admin routes and `snowtoken client revoke`), each
// through the script that writes the record. A token's revocation is
// logged whether or not its record exists: a validator that decides from
// the log never read the record, so a token whose record was lost
// (evicted) is live to it until the log revokes it. It is logged once: the
// entry's script writes st:{revlog}:r:<jti>, beside the log, and appends
// nothing while that key exists, until three leeways after the token's exp
// (by Redis's clock, at most LogRetention), by when the token validates
// nowhere and its revocation is not logged at all. So revoking a token
// again and again does not grow the log. A subject's revocation is logged
// even when the subject has no marker (which it does not get). A client
// time not later than the one held logs nothing: the entry that raised it
// covers every token this one would. On a single Redis or Sentinel the
// script writes the entry and then the record: one atomic step, both or
// neither, in the one round trip the revocation took before the log. On a
// Cluster the log, in a slot of its own ({revlog}, with its dedupe keys
// and heartbeats), cannot be in the record's script: the entry is appended
// first, then the record written; a token's revocation is the entry's
// script and a DEL, a subject's the append and the script, a client's a
// check that its time is later, the append and the script: two, two and
// three round trips. A revocation succeeds (200 or 204) only when both
// were written; either failing is ErrUnavailable (503). The window between
// them is safe because of that order: an entry whose record write failed
// tells a reader to refuse a token Redis still holds valid (closed, and
// the client, told 503, revokes again: a token's DEL then goes through
// though its entry is not appended again); the other order would leave a
// revocation that no reader of the log hears of (open).
//
// Each append trims, with MINID ~, the entries older than its own entry's
// ID less LogRetention (the longest token lifetime and three leeways: see
// LogRetention), so the log holds the revocations of one token lifetime.
// The floor is Redis's clock, never the revoking process's: one whose clock
// ran ahead would trim recent entries, its own too. "~" drops whole listpack nodes only (of up to
// stream-node-max-entries, 100): cheap, and never an entry newer than the
// floor; a few older ones stay until their node is all older. The log has
// no length cap (MAXLEN): one would drop revocations of tokens still valid.
// Its size is the revocation rate times LogRetention, about 36 bytes an
// entry, and a token's dedupe key about 160 more until the token's exp
// (TestRedisMemoryPerLogEntry). The log has no TTL, so no maxmemory-policy
// the service accepts evicts it.
//
// # What happens when a key disappears
//
// State that a security decision depends on is never assumed:
//
//	record lost   (eviction, expiry, failover, restart)  SessionLive refuses the token: the session is over
//	marker lost   (eviction, failover, restart)          SessionLive refuses every record of the subject:
//	                                                     whether it was revoked cannot be known,
//	                                                     so it fails closed (ErrMarkerLost)
//	                                                     and the next Issue starts a new marker
//	client key lost (FLUSHALL, failover, restart;        the client's revoked tokens validate again:
//	  no TTL, so no policy redisconf accepts evicts it)  docs/redis.md says what rules that out
//	opaque record lost (as a record)                     the opaque token is invalid: the session is over;
//	                                                     its claims are gone with it, so nothing else
//	                                                     can validate it either (but see below)
//	opaque record unreadable (another layout version,    the token is invalid (fail closed), never misread
//	  written by hand)
//	dedupe key lost (st:{revlog}:r:<jti>; its loss       a revocation of the token again appends its
//	  comes with the log's: same slot, same script)      entry again: one too many (closed)
//	revocation log lost (FLUSHALL, failover, restart;    its followers detect the loss (a new epoch:
//	  no TTL, so no policy redisconf accepts evicts it)  package revlog) and answer LogUnknown until
//	                                                     they have read it again: Validate reads Redis
//
// So eviction under any maxmemory-policy the service accepts can log users
// out but never bring a revoked token back. What can bring one back is a revocation that Redis
// acknowledged and then lost (a failover before it reached the replica, a
// restart without an append-only file): docs/redis.md says which Redis
// settings rule that out.
//
// A validator that decides from the log (token.Options.Revocations) no longer
// reads a lost record or marker as "revoked": it accepts a token the log
// says is live, and the log says nothing of a record that was evicted. That
// holds because every revocation is in the log, a token's whether or not
// its record exists, a subject's whether or not it has a marker, and a
// loss of the log itself is detected (its epoch; the follower vouches only
// for tokens checked in Redis since its last full read, or issued after
// the log's horizon). One gap remains: an opaque token's revocation needs
// its record to check its secret, so when the record is gone only a
// replica that has the token in its cache logs it (token.Service.Revoke); the
// others that cached it accept it until its exp.
package redisstore
