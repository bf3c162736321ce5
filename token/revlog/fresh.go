package revlog

import "time"

// Freshness: whether the follower's state may be decided on, from when
// the last heartbeat was accepted (the package doc's rule).

// freshness is when the last heartbeat was accepted.
type freshness struct {
	at     time.Time // the send time of the read before the one that brought it; zero: none since the last snapshot
	synced bool
}

// Fresh reports whether the state may be decided on at now (a reading of
// Options.Now): see the package doc.
func (f *Follower) Fresh(now time.Time) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.isFresh(now)
}

// isFresh is Fresh, under f.mu.
func (f *Follower) isFresh(now time.Time) bool {
	return f.fresh.synced && !f.fresh.at.IsZero() && now.Sub(f.fresh.at) < f.opts.Threshold
}

// Heard reports whether the follower accepted a heartbeat within the
// last d (WriterOptions.Heard).
func (f *Follower) Heard(d time.Duration) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return !f.heardAt.IsZero() && f.opts.Now().Sub(f.heardAt) < d
}

// lastHeartbeat is when the last heartbeat was accepted (zero: none).
func (f *Follower) lastHeartbeat() time.Time {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.fresh.at
}
