// Package revfeedtest is a stand-in for a revlog.Follower as the feed
// (package revfeed) reads one, with explicit state that a test sets: the
// events of one epoch, how many of them are forgotten, and whether the
// state is fresh. Tests of the feed, of the client module following it and
// of proxies in front of it use it; the follower's own tests are revlog's.
package revfeedtest

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/snowtoken/snowtoken/client/revocation"
)

// Epoch is the epoch of a new Source.
const Epoch = "0123456789abcdef0123456789abcdef.1795700000000" // revlog's form: 32 hex digits, ".", the ms it began

// Horizon is every Source's Horizon, Unix ms.
const Horizon = 1000

// Source implements revfeed.Source over state the test sets.
type Source struct {
	mu      sync.Mutex
	epoch   string
	evs     []revocation.Event
	floor   int // events before it are forgotten: not resumable
	fresh   bool
	age     time.Duration
	changed chan struct{}
	calls   chan struct{}
	version uint64 // Status.Version: moved by Add and NewEpoch
	snaps   int    // Snapshot calls
}

// New returns a Source of Epoch with no events, fresh or not.
func New(fresh bool) *Source {
	return &Source{epoch: Epoch, fresh: fresh, changed: make(chan struct{}), calls: make(chan struct{}, 1)}
}

// Add applies an event of kind for key; its time (At, and Cutoff for a
// client) is at, Unix ms, and a token's Exp is exp, Unix s.
func (s *Source) Add(kind revocation.Kind, key string, at, exp int64) revocation.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := revocation.Event{ID: fmt.Sprintf("%s-%d-%d", s.epoch, at, len(s.evs)), Kind: kind, Key: key, At: at}
	switch kind {
	case revocation.KindToken:
		ev.Exp = exp
	case revocation.KindClient:
		ev.Cutoff = at
	}
	s.evs = append(s.evs, ev)
	s.version++
	s.changeLocked()
	return ev
}

// NewLarge returns a fresh Source holding n revocations of kind, with keys
// and times of a real log's lengths: a token's jti a Snowflake ID (18
// digits), a subject a UUID (36 characters), a client ID of 24 characters,
// each at a time of 13 digits (Unix ms).
func NewLarge(kind revocation.Kind, n int) *Source {
	s := New(true)
	const at = 1795700000000
	for i := range n {
		var key string
		switch kind {
		case revocation.KindToken:
			key = strconv.FormatInt(117811659438825472+int64(i), 10)
		case revocation.KindSubject:
			key = fmt.Sprintf("3f2a9c1e-7b4d-4e8a-9c0f-%012d", i)
		case revocation.KindClient:
			key = fmt.Sprintf("partner-service-%08d", i)
		}
		s.Add(kind, key, at+int64(i), 1795800000)
	}
	return s
}

// Events returns the events applied so far.
func (s *Source) Events() []revocation.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]revocation.Event(nil), s.evs...)
}

// Forget makes the first n events unresumable, as a follower that no longer
// keeps them.
func (s *Source) Forget(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.floor = n
}

// NewEpoch replaces the state with that of another epoch holding evs' keys
// (a resync): streams from the old epoch reset.
func (s *Source) NewEpoch(epoch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.evs
	s.epoch, s.evs, s.floor = epoch, nil, 0
	for i, ev := range old {
		ev.ID = fmt.Sprintf("%s-%d-%d", epoch, ev.At, i)
		s.evs = append(s.evs, ev)
	}
	s.version++
	s.changeLocked()
}

func (s *Source) changeLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// SetFresh sets whether the state is fresh, and its age.
func (s *Source) SetFresh(fresh bool, age time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fresh, s.age = fresh, age
	s.changeLocked()
}

// StatusCalls receives (without blocking Status) after Status is called:
// a tick of the feed.
func (s *Source) StatusCalls() <-chan struct{} { return s.calls }

// Since implements revfeed.Source.
func (s *Source) Since(after string, max int) ([]revocation.Event, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := -1
	if after == s.epoch+"-0-0" && s.floor == 0 {
		start = 0
	}
	for i, ev := range s.evs {
		if ev.ID == after && i+1 >= s.floor {
			start = i + 1
		}
	}
	if start < 0 {
		return nil, false
	}
	end := min(len(s.evs), start+max)
	return append([]revocation.Event(nil), s.evs[start:end]...), true
}

// Changed implements revfeed.Source.
func (s *Source) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Status implements revfeed.Source.
func (s *Source) Status(time.Time) revocation.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case s.calls <- struct{}{}:
	default:
	}
	return s.statusLocked()
}

func (s *Source) statusLocked() revocation.Status {
	last := s.epoch + "-0-0"
	if len(s.evs) > 0 {
		last = s.evs[len(s.evs)-1].ID
	}
	return revocation.Status{Fresh: s.fresh, Age: s.age, Epoch: s.epoch, Last: last, Horizon: Horizon, Version: s.version}
}

// Snapshots is how many times Snapshot was called: how many snapshots the
// feed built.
func (s *Source) Snapshots() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snaps
}

// Snapshot implements revfeed.Source.
func (s *Source) Snapshot(time.Time) revocation.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snaps++
	snap := revocation.Snapshot{Status: s.statusLocked()}
	for _, ev := range s.evs {
		switch ev.Kind {
		case revocation.KindToken:
			snap.Tokens = append(snap.Tokens, ev)
		case revocation.KindSubject:
			snap.Subjects = append(snap.Subjects, ev)
		case revocation.KindClient:
			snap.Clients = append(snap.Clients, ev)
		}
	}
	return snap
}
