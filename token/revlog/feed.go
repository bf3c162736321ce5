package revlog

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Event is one log entry a Follower applied, as the feed (package revfeed)
// serves it to consumers that follow the log over HTTP.
type Event struct {
	// ID is the epoch, a "-", and the entry's stream ID (epoch-ms-seq):
	// the SSE id, and what Since resumes after.
	ID string
	// Kind is KindToken, KindSubject or KindClient.
	Kind string
	// Key is the jti, the subject or the client.
	Key string
	// At is the entry's time, Unix ms on Redis's clock (its stream ID's).
	At int64
	// Exp (KindToken) is the token's exp, Unix s; 0 when unknown (then it is
	// remembered for the log's retention from At).
	Exp int64
	// Cutoff (KindClient) is the client's revocation time, Unix ms: its
	// tokens whose ID's time is at or before it are revoked.
	Cutoff int64
}

// Kinds of Event.
const (
	KindToken   = "t"
	KindSubject = "s"
	KindClient  = "c"
)

// Status is what a Follower knows of its own state.
type Status struct {
	// Fresh is Fresh(now).
	Fresh bool
	// Age is how long ago the read that vouches for the state was sent
	// (the freshness stamp); meaningless when not Fresh.
	Age time.Duration
	// Epoch is the epoch of the state.
	Epoch string
	// Last is the ID of the last entry applied (an Event.ID; the epoch and
	// "0-0" for none): everything up to it is in the state.
	Last string
	// Horizon is when the epoch began, Unix ms on Redis's clock: no
	// revocation before it is in the log.
	Horizon int64
	// Version grows at every change of what Snapshot holds (an entry
	// applied, a revocation noted here or forgotten, a resync) and at no
	// other: the feed builds its snapshot once per Version.
	Version uint64
}

// Snapshot is a Follower's whole state: every token it remembers, the
// latest entry of each subject and of each client.
type Snapshot struct {
	Status
	Tokens, Subjects, Clients []Event
}

// Status is the follower's status at now, a reading of Options.Now.
func (f *Follower) Status(now time.Time) Status {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.status(now)
}

// status is Status, under f.mu.
func (f *Follower) status(now time.Time) Status {
	st := f.st
	s := Status{Fresh: f.isFresh(now), Epoch: st.epoch, Last: st.epoch + "-" + st.applied.String(), Horizon: st.horizon,
		Version: f.version}
	if s.Fresh {
		s.Age = now.Sub(f.fresh.at)
	}
	return s
}

// Since returns up to max events applied after the event whose ID is
// after, oldest first; ok is false when the follower cannot resume from
// after: another epoch, an ID it does not know, or one older than the
// events it keeps (at least the last 4,096).
func (f *Follower) Since(after string, max int) (evs []Event, ok bool) {
	epoch, id, err := parseEventID(after)
	if err != nil {
		return nil, false
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	st := f.st
	switch {
	case epoch != st.epoch || st.applied.less(id):
		return nil, false
	case id.less(st.ringFrom):
		return nil, false
	}
	i, _ := slices.BinarySearchFunc(st.ids, id, func(a, b streamID) int {
		switch {
		case a.less(b):
			return -1
		case b.less(a):
			return 1
		}
		return 0
	})
	for ; i < len(st.ids) && !id.less(st.ids[i]); i++ {
	}
	end := min(len(st.events), i+max)
	return slices.Clone(st.events[i:end]), true
}

// parseEventID splits an Event.ID into its epoch and stream ID.
func parseEventID(s string) (epoch string, id streamID, err error) {
	j := strings.LastIndexByte(s, '-')
	if j <= 0 {
		return "", id, fmt.Errorf("%w: event id %.80q", ErrEntry, s)
	}
	k := strings.LastIndexByte(s[:j], '-')
	if k <= 0 {
		return "", id, fmt.Errorf("%w: event id %.80q", ErrEntry, s)
	}
	id, err = parseID(s[k+1:])
	return s[:k], id, err
}

// Snapshot is the follower's whole state at now: every token it
// remembers, the latest entry of each subject and each client's latest
// cutoff, with the status they go with.
func (f *Follower) Snapshot(now time.Time) Snapshot {
	f.mu.RLock()
	defer f.mu.RUnlock()
	st := f.st
	sn := Snapshot{Status: f.status(now),
		Tokens:   make([]Event, 0, len(st.tokens)),
		Subjects: make([]Event, 0, len(st.subjects)),
		Clients:  make([]Event, 0, len(st.clients))}
	leeway := int64(f.opts.Leeway / time.Second)
	for jti, until := range st.tokens {
		sn.Tokens = append(sn.Tokens, Event{Kind: KindToken, Key: jti, Exp: until - leeway - 1})
	}
	for sub, e := range st.subjects {
		sn.Subjects = append(sn.Subjects, Event{Kind: KindSubject, Key: sub, At: e.at})
	}
	for c, e := range st.clients {
		sn.Clients = append(sn.Clients, Event{Kind: KindClient, Key: c, At: e.at, Cutoff: e.cutoff})
	}
	return sn
}
