package revlog

import (
	"time"

	"github.com/snowtoken/snowtoken/client/revocation"
)

// The feed's Source (package revfeed): the state's status, the events
// applied since an ID (the core's Ring), and the whole state.

// Status is the follower's status at now, a reading of Options.Now.
func (f *Follower) Status(now time.Time) revocation.Status {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.status(now)
}

// status is Status, under f.mu.
func (f *Follower) status(now time.Time) revocation.Status {
	s := f.st.core.Status(now)
	s.Version = f.version
	return s
}

// Since returns up to max events applied after the event whose ID is
// after, oldest first; ok is false when the follower cannot resume from
// after: another epoch, an ID it does not know, or one older than the
// events it keeps (at least the last revocation.RingSize).
func (f *Follower) Since(after string, max int) (evs []revocation.Event, ok bool) {
	id, err := revocation.ParseEventID(after)
	if err != nil {
		return nil, false
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.ring.Since(id, f.st.core.Last(), max)
}

// Snapshot is the follower's whole state at now: every token it
// remembers, the latest entry of each subject and each client's latest
// cutoff, with the status they go with.
func (f *Follower) Snapshot(now time.Time) revocation.Snapshot {
	f.mu.RLock()
	defer f.mu.RUnlock()
	sn := revocation.Snapshot{Status: f.status(now)}
	sn.Tokens, sn.Subjects, sn.Clients = f.st.core.Snapshot()
	return sn
}
