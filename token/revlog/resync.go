package revlog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/client/revocation"
)

// The full read (resync): the state read afresh from a snapshot of the
// log and swapped in, with what the state before held merged in; after a
// loss, the lost events written again and the epoch rotated.

// redo gives Options.Redo every event of the state whose ID is after the
// log's last ID (f.lostAfter), as the loss left it; a failure is logged
// (the rotation that follows still sends every replica to Redis for the
// older tokens).
func (f *Follower) redo(ctx context.Context) {
	if f.opts.Redo == nil {
		return
	}
	f.mu.RLock()
	evs := f.st.ring.After(f.lostAfter)
	f.mu.RUnlock()
	for _, ev := range evs {
		if err := f.opts.Redo(ctx, ev); err != nil {
			f.opts.Logger.Error("a revocation the revocation log lost could not be written again", "kind", ev.Kind, "event", ev.ID, "err", err.Error())
		}
	}
	if len(evs) > 0 {
		f.opts.Logger.Warn("revocations the revocation log lost written again", "events", len(evs))
	}
}

// errLoss: the log holds fewer entries, or an earlier last ID, than the
// state applied in the same epoch.
var errLoss = errors.New("revlog: entries applied earlier are gone from the log")

// rotate replaces the epoch the state holds with a new one, unless another
// follower did already.
func (f *Follower) rotate(ctx context.Context) error {
	f.mu.RLock()
	epoch := f.st.core.Epoch()
	f.mu.RUnlock()
	if err := rotateScript.Run(ctx, f.rdb, []string{f.keys.epoch}, epoch, newToken()).Err(); err != nil {
		return fmt.Errorf("revlog: rotate the epoch: %w", err)
	}
	return nil
}

// snapshotLua, with KEYS log, hb, epoch and ARGV a new epoch: the epoch,
// the log's last ID and entries-added, and the heartbeat stream's last ID.
var snapshotScript = redis.NewScript(infoLua + `
local hb = '0-0'
local r = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
if #r > 0 then hb = r[1][1] end
return {e, last, tostring(n), hb}
`)

// snapshot is what snapshotScript read.
type snapshot struct {
	epoch, lastID, hbID string
	last, hb            revocation.StreamID
	count, horizon      int64
}

func (f *Follower) snapshot(ctx context.Context) (snapshot, error) {
	r, err := snapshotScript.Run(ctx, f.rdb, []string{f.keys.log, f.keys.hb, f.keys.epoch}, newToken()).StringSlice()
	if err != nil {
		return snapshot{}, fmt.Errorf("revlog: snapshot: %w", err)
	}
	if len(r) != 4 {
		return snapshot{}, fmt.Errorf("%w: snapshot %q", ErrEntry, r)
	}
	sn := snapshot{epoch: r[0], lastID: r[1], hbID: r[3]}
	var err1, err2, err3, err4 error
	sn.last, err1 = parseID(r[1])
	sn.hb, err2 = parseID(r[3])
	sn.count, err3 = strconv.ParseInt(r[2], 10, 64)
	sn.horizon, err4 = horizonOf(r[0])
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return snapshot{}, fmt.Errorf("%w: snapshot %q: %w", ErrEntry, r, err)
	}
	return sn, nil
}

// sync counts a full read for reason, makes the follower unfresh, reads the whole log up to the
// snapshot's last ID, and swaps the state in, with what the state before
// it held merged in (a revocation is never undone). It returns when the
// snapshot was sent: every heartbeat a read from the snapshot's brings was
// written after. errLoss when the log is behind what the state before
// it applied in the same epoch.
func (f *Follower) sync(ctx context.Context, reason string) (time.Time, error) {
	f.mu.Lock()
	// Counted with the reset of freshness, under the lock: whoever sees
	// the count sees the state unfresh until this read is done.
	f.met.resyncs.WithLabelValues(reason).Inc()
	f.st.core.Stale()
	f.met.resynced(f.opts.Now())
	prev := f.st
	f.notify()
	f.mu.Unlock()
	sent := f.opts.Now()
	sn, err := f.snapshot(ctx)
	if err != nil {
		return sent, err
	}
	applied := prev.core.Last().StreamID
	if sn.epoch == prev.core.Epoch() && (sn.count < prev.count || sn.last.Less(applied)) {
		f.mu.Lock()
		f.lostAfter = sn.last
		f.mu.Unlock()
		return sent, fmt.Errorf("%w: applied %s (%d added), the log is at %s (%d added)", errLoss, applied, prev.count, sn.last, sn.count)
	}
	st, err := f.newState(sn.epoch, sn.horizon)
	if err != nil {
		return sent, err
	}
	st.hbPos, st.count, st.base = sn.hbID, sn.count, mark{sn.last, sn.count}
	now := f.opts.Now()
	for start := "-"; sn.last != (revocation.StreamID{}); {
		msgs, err := f.rdb.XRangeN(ctx, f.keys.log, start, sn.lastID, pageSize).Result()
		if err != nil {
			return sent, fmt.Errorf("revlog: full read: %w", err)
		}
		for _, m := range msgs {
			if err := f.applyEntry(st, m, now); err != nil {
				return sent, err
			}
		}
		if len(msgs) < pageSize {
			break
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
	// Up to the last ID Redis generated, read or not: an entry deleted
	// since (XDEL, or trimmed) is not there to read, and a heartbeat names
	// the last generated.
	st.core.Advance(sn.last)
	st.core.Forget(now)
	f.swap(st, now)
	return sent, nil
}

// swap puts st, a full read's, in force: the core adopts what the state
// in force knew, with the local notes taken while the read ran (they
// write it under f.mu), and moves its marks past that state's
// (revocation.State.Adopt).
func (f *Follower) swap(st *state, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st.core.Adopt(f.st.core, now)
	f.st = st
	f.version++
	f.notify()
}
