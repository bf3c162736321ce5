package revlog

import "time"

// Bounds on what a Follower keeps: the ring of latest events (feed.go
// resumes from it) and the revocations forgotten once every token they
// cover has expired.

// record keeps ev among the latest events, dropping the oldest half when
// twice ringSize are kept.
func (st *state) record(ev Event, id streamID) {
	if len(st.events) >= 2*ringSize {
		n := len(st.events) - ringSize
		st.ringFrom = st.ids[n-1]
		st.events = append([]Event(nil), st.events[n:]...)
		st.ids = append([]streamID(nil), st.ids[n:]...)
	}
	st.events, st.ids = append(st.events, ev), append(st.ids, id)
}

// forget drops the tokens whose time is over, and the subjects and
// clients whose latest entry is older than retention (every token it
// covers has expired): a scan of the maps, at most once a second of now.
// It reports whether it dropped any.
func (st *state) forget(now time.Time, retention time.Duration) bool {
	if now.Unix() <= st.forgotAt {
		return false
	}
	st.forgotAt = now.Unix()
	n := len(st.tokens) + len(st.subjects) + len(st.clients)
	for jti, until := range st.tokens {
		if until <= now.Unix() {
			delete(st.tokens, jti)
		}
	}
	old := now.Add(-retention).UnixMilli()
	for sub, e := range st.subjects {
		if e.at < old {
			delete(st.subjects, sub)
		}
	}
	for c, e := range st.clients {
		if e.at < old && e.cutoff < old {
			delete(st.clients, c)
		}
	}
	return len(st.tokens)+len(st.subjects)+len(st.clients) < n
}
