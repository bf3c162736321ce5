package revocation

import (
	"errors"
	"fmt"
	"time"
)

// Errors of the core, each wrapped with %w by what returns it.
var (
	// ErrEventID: an event or stream ID that does not parse.
	ErrEventID = errors.New("revocation: malformed event id")
	// ErrEvent: an event that is none of the three kinds, or does not
	// follow the last one applied in the state's epoch.
	ErrEvent = errors.New("revocation: an event the state cannot apply")
	// ErrOptions: a negative Leeway or Retention.
	ErrOptions = errors.New("revocation: invalid options")
)

// Options are the rules' durations, each side's own.
type Options struct {
	// Leeway is the validators' leeway, the bound on clock skew: a revoked
	// token is remembered until its exp plus Leeway, and the rules leave to
	// a slower check what the clocks could decide either way. Zero is none.
	Leeway time.Duration
	// Retention is how long a revocation is remembered from its entry's
	// time when nothing shorter bounds it: a token whose exp is unknown, a
	// subject's or a client's revocation (every token it covers has expired
	// past it). The issuer passes token.LogRetention of its MaxTTL and
	// leeway; a consumer its FeedRetention plus Leeway. Zero means a
	// revocation of unknown reach is let go at the next Forget.
	Retention time.Duration
}

// State is what the revocation log says is revoked, as far as it was
// applied, and whether it is fresh enough to decide on; see the package
// doc. It is not safe for concurrent use: its holder locks it, deciding
// under a read lock (DecideLog, DecideFeed and the accessors only read).
type State struct {
	leewayMs, leewayS   int64
	retentionS          int64
	retentionMs         int64
	synced              bool // a full read or a snapshot, adopted
	epoch               string
	horizon             int64            // Unix ms when the epoch began
	last                StreamID         // the last entry applied, or advanced to
	tokens              map[string]int64 // jti -> Unix s from which it is forgotten
	subjects            map[string]subjectEntry
	clients             map[string]clientEntry
	start, seq          Mark  // marks below start were taken of an earlier state
	forgotten, forgotAt int64 // the newest subject's or client's revocation let go (Unix ms); the last Forget (Unix s)
	stamp, until        time.Time
}

// subjectEntry is the latest entry of a subject.
type subjectEntry struct {
	marker string
	at     int64 // Unix ms, the entry's time (a local note's: this replica's clock)
	seq    Mark  // the mark it was applied at
	local  bool  // NoteSubject's, until the entry comes
}

// clientEntry is the latest cutoff of a client.
type clientEntry struct {
	cutoff int64 // Unix ms; math.MaxInt64 when it did not parse
	at     int64 // Unix ms, the entry's time
}

// NewState returns an empty state of epoch, which began at horizon (Unix
// ms), that has applied nothing: not synced (Adopt makes it so) and never
// fresh until then.
func NewState(opts Options, epoch string, horizon int64) (*State, error) {
	if opts.Leeway < 0 || opts.Retention < 0 {
		return nil, fmt.Errorf("%w: a negative Leeway or Retention", ErrOptions)
	}
	return &State{leewayMs: opts.Leeway.Milliseconds(), leewayS: int64(opts.Leeway / time.Second),
		retentionS: int64(opts.Retention / time.Second), retentionMs: opts.Retention.Milliseconds(),
		epoch: epoch, horizon: horizon,
		tokens: map[string]int64{}, subjects: map[string]subjectEntry{}, clients: map[string]clientEntry{},
		start: 1, seq: 1}, nil
}

// Apply applies ev, which must follow the last event applied in the
// state's epoch, at now (a token already forgotten by now is not kept). A
// subject's entry replaces a later one's only if that was a local note.
func (s *State) Apply(ev Event, now time.Time) error {
	id, err := ParseEventID(ev.ID)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %w", ErrEvent, err)
	case !ev.Kind.Valid():
		return fmt.Errorf("%w: %s of kind %.8q", ErrEvent, ev.ID, ev.Kind)
	case id.Epoch != s.epoch || !s.last.Less(id.StreamID):
		return fmt.Errorf("%w: %s does not follow %s-%s", ErrEvent, ev.ID, s.epoch, s.last)
	}
	s.seq++
	switch ev.Kind {
	case KindToken:
		s.keepToken(ev.Key, s.tokenUntil(ev.Exp, ev.At, now), now)
	case KindSubject:
		if cur, ok := s.subjects[ev.Key]; !ok || cur.local || ev.At >= cur.at {
			s.subjects[ev.Key] = subjectEntry{marker: ev.Marker, at: ev.At, seq: s.seq}
		}
	case KindClient:
		if cur, ok := s.clients[ev.Key]; !ok || ev.Cutoff > cur.cutoff {
			s.clients[ev.Key] = clientEntry{cutoff: ev.Cutoff, at: ev.At}
		}
	}
	s.last = id.StreamID
	return nil
}

// tokenUntil is when a revoked token whose exp is exp (Unix s; 0 unknown)
// and whose entry is of at (Unix ms; 0 unknown: now) may be forgotten: past
// its exp and the leeway, else past the retention.
func (s *State) tokenUntil(exp, at int64, now time.Time) int64 {
	if exp > 0 {
		return exp + s.leewayS + 1
	}
	if at <= 0 {
		return now.Unix() + s.retentionS
	}
	return at/1000 + s.retentionS
}

// keepToken remembers jti until, unless that is past.
func (s *State) keepToken(jti string, until int64, now time.Time) bool {
	if until <= now.Unix() || until <= s.tokens[jti] {
		return false
	}
	s.tokens[jti] = until
	return true
}

// Advance moves the last applied up to to, when it is later: a full read
// reaches the last ID Redis generated, read or not (an entry deleted since
// is not there to read, and a heartbeat names the last generated).
func (s *State) Advance(to StreamID) {
	if s.last.Less(to) {
		s.last = to
	}
}

// The issuer's local notes: what a replica revoked itself, before its
// entry comes back through the log (token.LocalRevocations), so that it
// refuses at once.

// NoteToken notes that the token jti, whose exp is exp (Unix s; 0
// unknown: kept for the retention), was revoked here at now. It reports
// whether the state changed.
func (s *State) NoteToken(jti string, exp int64, now time.Time) bool {
	return s.keepToken(jti, s.tokenUntil(exp, 0, now), now)
}

// NoteSubject notes that subject was revoked here at now: every check
// marked before is void for its tokens, until its entry comes.
func (s *State) NoteSubject(subject string, now time.Time) {
	s.seq++
	at := now.UnixMilli()
	if cur, ok := s.subjects[subject]; ok {
		at = max(at, cur.at)
	}
	s.subjects[subject] = subjectEntry{at: at, seq: s.seq, local: true}
}

// NoteClient notes that client's tokens up to cutoff (Unix ms) were
// revoked here at now. It reports whether the state changed.
func (s *State) NoteClient(client string, cutoff int64, now time.Time) bool {
	if cur, ok := s.clients[client]; ok && cutoff <= cur.cutoff {
		return false
	}
	s.clients[client] = clientEntry{cutoff: cutoff, at: now.UnixMilli()}
	return true
}

// Heard makes the state fresh from stamp for within: until stamp+within
// (on the holder's clock: a monotonic reading keeps its monotonic part).
// stamp is when the holder last knew the state whole: the issuer's, the
// send time of the read before the one that brought a heartbeat; a
// consumer's, the heartbeat's signing time less its age, on this clock.
func (s *State) Heard(stamp time.Time, within time.Duration) {
	s.stamp, s.until = stamp, stamp.Add(within)
}

// Stale makes the state not fresh until the next Heard.
func (s *State) Stale() { s.stamp, s.until = time.Time{}, time.Time{} }

// Fresh reports whether the state may be decided on at now: synced, and
// now before the freshness Heard last gave.
func (s *State) Fresh(now time.Time) bool {
	return s.synced && !s.until.IsZero() && now.Before(s.until)
}

// Stamp is the stamp Heard last took; zero after Stale or none.
func (s *State) Stamp() time.Time { return s.stamp }

// Forget drops the tokens whose time is over, and the subjects and
// clients whose latest entry (and cutoff) is older than the retention,
// noting the newest of those let go (DecideFeed cannot tell of a token
// issued before it): a scan of the maps, at most once a second of now. It
// reports whether it dropped any.
func (s *State) Forget(now time.Time) bool {
	if now.Unix() <= s.forgotAt {
		return false
	}
	s.forgotAt = now.Unix()
	n := len(s.tokens) + len(s.subjects) + len(s.clients)
	for jti, until := range s.tokens {
		if until <= now.Unix() {
			delete(s.tokens, jti)
		}
	}
	old := now.UnixMilli() - s.retentionMs
	for sub, e := range s.subjects {
		if e.at < old {
			delete(s.subjects, sub)
			s.forgotten = max(s.forgotten, e.at)
		}
	}
	for c, e := range s.clients {
		if e.at < old && e.cutoff < old {
			delete(s.clients, c)
			s.forgotten = max(s.forgotten, e.cutoff)
		}
	}
	return len(s.tokens)+len(s.subjects)+len(s.clients) < n
}

// Adopt puts s, a full read's, in force in place of prev (nil for none),
// at now: it adds what prev knew and s does not (a revocation is never
// undone: its tokens not yet forgotten, a later entry of a subject, a
// later cutoff of a client), moves s's first mark past every mark taken of
// prev, even one a local note moved while the read ran, and counts every
// subject entry of s as of the full read. s is synced from then on.
func (s *State) Adopt(prev *State, now time.Time) {
	if prev != nil {
		for jti, until := range prev.tokens {
			s.keepToken(jti, until, now)
		}
		for sub, e := range prev.subjects {
			if cur, ok := s.subjects[sub]; !ok || e.at > cur.at {
				s.subjects[sub] = e
			}
		}
		for c, e := range prev.clients {
			if cur, ok := s.clients[c]; !ok || e.cutoff > cur.cutoff {
				s.clients[c] = e
			}
		}
		s.start = max(s.start, prev.seq+1)
	}
	s.seq = s.start
	for sub, e := range s.subjects {
		e.seq = s.start
		s.subjects[sub] = e
	}
	s.synced = true
}

// FromSnapshot is the state a consumer holds from the feed's snapshot sn,
// at now: synced, not fresh until the first heartbeat after it.
func FromSnapshot(opts Options, sn SnapshotState, now time.Time) (*State, error) {
	last, err := ParseEventID(sn.Last)
	if err != nil || last.Epoch != sn.Epoch {
		return nil, fmt.Errorf("%w: a snapshot whose last %.80q is not of its epoch", ErrEvent, sn.Last)
	}
	s, err := NewState(opts, sn.Epoch, sn.Horizon)
	if err != nil {
		return nil, err
	}
	for _, t := range sn.Tokens {
		s.keepToken(t.JTI, s.tokenUntil(t.Exp, t.At, now), now)
	}
	for _, e := range sn.Subjects {
		if cur, ok := s.subjects[e.Subject]; !ok || e.At > cur.at {
			s.subjects[e.Subject] = subjectEntry{at: e.At, seq: s.seq}
		}
	}
	for _, e := range sn.Clients {
		if cur, ok := s.clients[e.ClientID]; !ok || e.Cutoff > cur.cutoff {
			s.clients[e.ClientID] = clientEntry{cutoff: e.Cutoff, at: e.At}
		}
	}
	s.last = last.StreamID
	s.Adopt(nil, now)
	return s, nil
}

// Snapshot lists the whole state as events without IDs: every token it
// remembers (its Exp the time it is kept for, less the leeway), the latest
// entry of each subject and each client's latest cutoff.
func (s *State) Snapshot() (tokens, subjects, clients []Event) {
	tokens = make([]Event, 0, len(s.tokens))
	subjects = make([]Event, 0, len(s.subjects))
	clients = make([]Event, 0, len(s.clients))
	for jti, until := range s.tokens {
		tokens = append(tokens, Event{Kind: KindToken, Key: jti, Exp: until - s.leewayS - 1})
	}
	for sub, e := range s.subjects {
		subjects = append(subjects, Event{Kind: KindSubject, Key: sub, At: e.at, Marker: e.marker})
	}
	for c, e := range s.clients {
		clients = append(clients, Event{Kind: KindClient, Key: c, At: e.at, Cutoff: e.cutoff})
	}
	return tokens, subjects, clients
}

// Status is the state's status at now (Version zero: its holder counts).
func (s *State) Status(now time.Time) Status {
	st := Status{Fresh: s.Fresh(now), Epoch: s.epoch, Last: s.Last().String(), Horizon: s.horizon}
	if st.Fresh {
		st.Age = now.Sub(s.stamp)
	}
	return st
}

// Epoch is the state's epoch.
func (s *State) Epoch() string { return s.epoch }

// Horizon is when the state's epoch began, Unix ms.
func (s *State) Horizon() int64 { return s.horizon }

// Last is the ID of the last entry applied (or advanced to).
func (s *State) Last() EventID { return EventID{s.epoch, s.last} }

// Mark is the state's position (a token.LogMark): it grows with every
// entry applied and every subject noted, and a full read's state starts
// past every mark of the state before it.
func (s *State) Mark() Mark { return s.seq }

// Synced reports whether the state is a full read's or a snapshot's.
func (s *State) Synced() bool { return s.synced }

// TokenRevoked reports whether the state revokes the token jti.
func (s *State) TokenRevoked(jti string) bool {
	_, ok := s.tokens[jti]
	return ok
}

// SubjectMarker is the latest marker the log gave sub (empty for a local
// note or a consumer's state).
func (s *State) SubjectMarker(sub string) (string, bool) {
	e, ok := s.subjects[sub]
	return e.marker, ok
}

// ClientCutoff is the latest time (Unix ms) up to which the state revokes
// client's tokens; math.MaxInt64 when an entry's time did not parse.
func (s *State) ClientCutoff(client string) (int64, bool) {
	c, ok := s.clients[client]
	return c.cutoff, ok
}
