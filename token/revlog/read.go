package revlog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/client/revocation"
)

// Following: XREAD BLOCK on the log and the heartbeat stream, each
// entry applied to the state and each heartbeat checked against it.

// readSlack is how much longer than BlockTimeout a read may take: the
// deadline of its context, which a client with ContextTimeoutEnabled (as
// package config builds them) holds the connection to. Without it go-redis
// waits BlockTimeout and 10 s more.
const readSlack = time.Second

// follow reads both streams until a fault, which it returns as a reason.
// since is when the read before was sent whose reply left no heartbeat
// unread (at first, the snapshot): a heartbeat the next read brings was
// written after since, so since is its freshness stamp, never the later
// send time of the read that brought it (which a heartbeat written long
// before, left unread by a full page, would make look new).
func (f *Follower) follow(ctx context.Context, since time.Time) (string, error) {
	for {
		f.mu.RLock()
		pos, hbPos := f.st.core.Last().StreamID.String(), f.st.hbPos
		f.mu.RUnlock()
		sent := f.opts.Now()
		rctx, cancel := context.WithTimeout(ctx, f.opts.BlockTimeout+readSlack)
		res, err := f.rdb.XRead(rctx, &redis.XReadArgs{Streams: []string{f.keys.log, f.keys.hb, pos, hbPos},
			Count: pageSize, Block: f.opts.BlockTimeout}).Result()
		cancel()
		if errors.Is(err, redis.Nil) {
			if reason, err := f.quiet(ctx); reason != "" {
				return reason, err
			}
			since = sent
			continue
		}
		if err != nil {
			return ReasonError, err
		}
		full, reason, err := f.apply(res, since)
		if reason != "" {
			return reason, err
		}
		if !full {
			since = sent
		}
	}
}

// quiet checks, when a read brought nothing in BlockTimeout, that reading
// on can still bring something: that the epoch is the same and neither
// stream is behind the IDs read from (a Redis restarted with a clock behind
// adds entries a read from them never returns). Without a writer this is
// one snapshot script a BlockTimeout, never a full read.
func (f *Follower) quiet(ctx context.Context) (string, error) {
	sn, err := f.snapshot(ctx)
	if err != nil {
		return ReasonError, err
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	hb, err := parseID(f.st.hbPos)
	switch {
	case err != nil:
		return ReasonEntry, err
	case sn.epoch != f.st.core.Epoch():
		return ReasonEpoch, nil
	case sn.count < f.st.count || sn.last.Less(f.st.core.Last().StreamID):
		f.lostAfter = sn.last // under f.mu's read lock: only this goroutine writes it
		return ReasonLoss, nil
	case sn.hb.Less(hb):
		return ReasonQuiet, nil
	}
	return "", nil
}

// apply applies one XREAD reply: its log entries, then, unless the log
// part is a full page (more may follow: full), its heartbeats, stamped
// fresh as of since (see follow). It returns a reason to resync, or "".
func (f *Follower) apply(res []redis.XStream, since time.Time) (full bool, reason string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, now := f.st, f.opts.Now()
	var hbs []redis.XMessage
	for _, s := range res {
		if s.Stream == f.keys.hb {
			hbs = s.Messages
			continue
		}
		for _, m := range s.Messages {
			f.version++
			if err := f.applyEntry(st, m, now); err != nil {
				return false, ReasonEntry, err
			}
			st.count++
			st.recent = append(st.recent, mark{st.core.Last().StreamID, st.count})
		}
		full = len(s.Messages) == pageSize
	}
	f.notify()
	if len(st.recent) > maxRecent {
		return full, ReasonBacklog, nil
	}
	if full {
		return true, "", nil // the heartbeats are read again with the rest
	}
	for _, m := range hbs {
		if reason, err := f.applyHeartbeat(st, m); reason != "" {
			return false, reason, err
		}
	}
	if len(hbs) > 0 {
		f.met.accepted(since, now)
		st.core.Heard(since, f.opts.Threshold)
		f.heardAt = now
		if st.core.Forget(now) {
			f.version++
		}
	}
	return false, "", nil
}

// applyHeartbeat checks one heartbeat against the state and moves the base
// to it; see the package doc.
func (f *Follower) applyHeartbeat(st *state, m redis.XMessage) (string, error) {
	st.hbPos = m.ID
	e, _ := m.Values["e"].(string)
	ls, _ := m.Values["l"].(string)
	ns, _ := m.Values["n"].(string)
	l, err := parseID(ls)
	n, err2 := strconv.ParseInt(ns, 10, 64)
	if err != nil || err2 != nil {
		return ReasonEntry, fmt.Errorf("%w: heartbeat %s %v", ErrEntry, m.ID, m.Values)
	}
	applied := st.core.Last().StreamID
	if e != st.core.Epoch() {
		return ReasonEpoch, nil
	}
	if applied.Less(l) {
		return ReasonUnapplied, nil
	}
	if l.Less(st.base.id) {
		f.lostAfter = l
		return ReasonLoss, nil // older than what we read: entries we applied are gone
	}
	if hb, err := parseID(m.ID); err == nil && l.Less(applied) && hb.MS > applied.MS {
		// Appended after the last entry applied (Redis's clock, a later
		// millisecond), yet it does not name it: the log lost it.
		f.lostAfter = l
		return ReasonLoss, nil
	}
	at, i := st.base.count, 0
	for ; i < len(st.recent) && !l.Less(st.recent[i].id); i++ {
		at = st.recent[i].count
	}
	switch {
	case n < at:
		f.lostAfter = l
		return ReasonLoss, nil // fewer entries added than we applied
	case n > at:
		return ReasonTrimmed, nil // some were removed before we read them
	}
	st.base, st.recent = mark{l, n}, append(st.recent[:0], st.recent[i:]...)
	return "", nil
}

// applyEntry reads one log entry as an event, applies it to st's core
// and keeps it among the latest events.
func (f *Follower) applyEntry(st *state, m redis.XMessage, now time.Time) error {
	id, err := parseID(m.ID)
	if err != nil {
		return err
	}
	k, _ := m.Values["k"].(string)
	i, _ := m.Values["i"].(string)
	v, _ := m.Values["v"].(string)
	ev := revocation.Event{ID: revocation.EventID{Epoch: st.core.Epoch(), StreamID: id}.String(),
		Kind: revocation.Kind(k), Key: i, At: int64(id.MS)}
	switch ev.Kind {
	case revocation.KindToken:
		if exp, err := strconv.ParseInt(v, 10, 64); err == nil && exp > 0 {
			ev.Exp = exp
		}
	case revocation.KindSubject:
		ev.Marker = v
	case revocation.KindClient:
		c, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			c = math.MaxInt64 // fail closed: every token of the client
		}
		ev.Cutoff = c
	}
	if err := st.core.Apply(ev, now); err != nil {
		return fmt.Errorf("%w: log entry %s: %w", ErrEntry, m.ID, err)
	}
	st.ring.Record(ev, id)
	f.met.applied.Inc()
	return nil
}
