package revlog

import "time"

// Freshness: whether the follower's state may be decided on, from when
// the last heartbeat was accepted (the package doc's rule; the core's
// State keeps it: revocation.State.Heard and Fresh).

// Fresh reports whether the state may be decided on at now (a reading of
// Options.Now): see the package doc.
func (m *memory) Fresh(now time.Time) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.core.Fresh(now)
}

// Heard reports whether the follower accepted a heartbeat within the
// last d (WriterOptions.Heard).
func (f *Follower) Heard(d time.Duration) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return !f.heardAt.IsZero() && f.opts.Now().Sub(f.heardAt) < d
}

// lastHeartbeat is the stamp of the last heartbeat accepted (zero: none
// since the last full read began).
func (m *memory) lastHeartbeat() time.Time {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.core.Stamp()
}
