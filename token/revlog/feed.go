package revlog

import (
	"time"

	"github.com/snowtoken/snowtoken/client/revocation"
)

// The feed's Source (package revfeed): the state's status, the events
// applied since an ID (the core's Ring), and the whole state.

// Status is the follower's status at now, a reading of Options.Now.
func (m *memory) Status(now time.Time) revocation.Status {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.status(now)
}

// status is Status, under f.mu.
func (m *memory) status(now time.Time) revocation.Status {
	s := m.st.core.Status(now)
	s.Version = m.version
	return s
}

// Since returns up to max events applied after the event whose ID is
// after, oldest first; ok is false when the follower cannot resume from
// after: another epoch, an ID it does not know, or one older than the
// events it keeps (at least the last revocation.RingSize).
func (m *memory) Since(after string, max int) (evs []revocation.Event, ok bool) {
	id, err := revocation.ParseEventID(after)
	if err != nil {
		return nil, false
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.ring.Since(id, m.st.core.Last(), max)
}

// Snapshot is the follower's whole state at now: every token it
// remembers, the latest entry of each subject and each client's latest
// cutoff, with the status they go with.
func (m *memory) Snapshot(now time.Time) revocation.Snapshot {
	m.mu.RLock()
	defer m.mu.RUnlock()
	sn := revocation.Snapshot{Status: m.status(now)}
	sn.Tokens, sn.Subjects, sn.Clients = m.st.core.Snapshot()
	return sn
}
