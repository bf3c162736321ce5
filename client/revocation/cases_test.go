package revocation

import (
	"fmt"
	"testing"
	"time"
)

// The one table of cases both rules run against: the issuer's (DecideLog)
// and the consuming service's (DecideFeed), each case a state built the
// same way and one token, with what each rule answers of it.

const (
	epoch  = "0123456789abcdef0123456789abcdef.1795700000000"
	leeway = 5 * time.Second
)

// now is the clock of every case; the epoch began three hours before it.
var (
	now     = time.UnixMilli(1_795_710_800_000)
	horizon = now.Add(-3 * time.Hour).UnixMilli()
)

// ms is Unix ms d from now.
func ms(d time.Duration) int64 { return now.Add(d).UnixMilli() }

// decisionCase is a state and a token. The state: the events of a full
// read (read), adopted, then a mark taken (the token's Checked, if
// checked), then events applied and local notes taken after it (after,
// notes), then forgotten what the retention (an hour) lets go, then made
// fresh unless stale.
type decisionCase struct {
	name      string
	read      []Event
	unsynced  bool // never adopted: a consumer before its snapshot, a follower before its first full read
	after     []Event
	notes     func(s *State)
	stale     bool
	forget    bool
	checked   bool
	q         Query
	log, feed Verdict
}

// tok, sub and cli are events at the time at from now.
func tok(jti string, exp int64, at time.Duration) Event {
	return Event{Kind: KindToken, Key: jti, Exp: exp, At: ms(at)}
}
func sub(subject string, at time.Duration) Event {
	return Event{Kind: KindSubject, Key: subject, At: ms(at), Marker: "m-" + subject}
}
func cli(client string, cutoff int64, at time.Duration) Event {
	return Event{Kind: KindClient, Key: client, Cutoff: cutoff, At: ms(at)}
}

// token is a query for a token of alice at gw issued d from now (to the
// ms: its ID's time, a whole second so that the consumer's iat is the same).
func token(jti string, d time.Duration) Query {
	return Query{JTI: jti, Subject: "alice", Client: "gw", Issued: ms(d)}
}

// parent is a parent issued to client d from now; exchanged is q with
// parents ps (nearest first).
func parent(jti, client string, d time.Duration) Parent {
	return Parent{JTI: jti, Client: client, Issued: ms(d)}
}
func exchanged(q Query, ps ...Parent) Query {
	q.Parents = ps
	return q
}

var inAnHour = now.Add(time.Hour).Unix()

// child is a token exchanged a minute ago from a token of web's.
var child = exchanged(token("3", -time.Minute), parent("2", "web", -2*time.Minute))

var cases = []decisionCase{
	{name: "fresh, nothing revoked, issued well after the horizon",
		q: token("1", -time.Minute), log: Live, feed: Live},
	{name: "stale: neither decides live",
		stale: true, q: token("1", -time.Minute), log: Unknown, feed: Unknown},
	{name: "never synced, even with the jti revoked",
		unsynced: true, read: []Event{tok("1", inAnHour, -time.Minute)}, q: token("1", -2*time.Minute), log: Unknown, feed: Unknown},
	{name: "its jti revoked",
		read: []Event{tok("1", inAnHour, -time.Minute)}, q: token("1", -2*time.Minute), log: Revoked, feed: Revoked},
	{name: "its jti revoked, stale: the consumer keeps what it knows, the issuer asks Redis",
		stale: true, read: []Event{tok("1", inAnHour, -time.Minute)}, q: token("1", -2*time.Minute), log: Unknown, feed: Revoked},
	{name: "its jti revoked with an exp long past: forgotten",
		read: []Event{tok("1", now.Add(-time.Minute).Unix(), -2*time.Minute)}, q: token("1", -3*time.Minute), log: Live, feed: Live},
	{name: "its jti revoked, exp unknown: kept for the retention",
		read: []Event{tok("1", 0, -time.Minute)}, q: token("1", -2*time.Minute), log: Revoked, feed: Revoked},
	{name: "its jti revoked after the mark",
		checked: true, after: []Event{tok("1", inAnHour, -time.Second)}, q: token("1", -time.Minute), log: Revoked, feed: Revoked},
	{name: "issued before the horizon",
		q: token("1", -4*time.Hour), log: Unknown, feed: Unknown},
	{name: "issued within the leeway after the horizon",
		q: Query{JTI: "1", Subject: "alice", Client: "gw", Issued: horizon + 2000}, log: Unknown, feed: Unknown},
	{name: "issued before the horizon, checked live by Redis: the mark vouches",
		checked: true, q: token("1", -4*time.Hour), log: Live, feed: Unknown},
	{name: "its client cut off well after it was issued",
		read: []Event{cli("gw", ms(-time.Minute), -time.Minute)}, q: token("1", -2*time.Minute), log: Revoked, feed: Revoked},
	{name: "its client cut off at the very ms it was issued: the consumer reads iat to the second",
		read: []Event{cli("gw", ms(-time.Minute), -time.Minute)}, q: token("1", -time.Minute), log: Revoked, feed: Unknown},
	{name: "its client cut off two seconds before it was issued: within the leeway",
		read: []Event{cli("gw", ms(-time.Minute), -time.Minute)}, q: token("1", -time.Minute+2*time.Second), log: Live, feed: Unknown},
	{name: "its client cut off well before it was issued",
		read: []Event{cli("gw", ms(-time.Minute), -time.Minute)}, q: token("1", -30*time.Second), log: Live, feed: Live},
	{name: "another client cut off",
		read: []Event{cli("other", ms(-time.Minute), -time.Minute)}, q: token("1", -2*time.Minute), log: Live, feed: Live},
	{name: "a client entry that did not parse cuts off every token",
		read: []Event{cli("gw", 1<<63-1, -time.Minute)}, q: token("1", -30*time.Second), log: Revoked, feed: Revoked},
	{name: "its subject revoked after it was issued, unchecked",
		read: []Event{sub("alice", -time.Minute)}, q: token("1", -2*time.Minute), log: Unknown, feed: Revoked},
	{name: "its subject revoked well before it was issued, unchecked: only Redis's marker tells the issuer",
		read: []Event{sub("alice", -2*time.Minute)}, q: token("1", -time.Minute), log: Unknown, feed: Live},
	{name: "its subject revoked within the leeway of its issue",
		read: []Event{sub("alice", -time.Minute)}, q: token("1", -time.Minute+time.Second), log: Unknown, feed: Unknown},
	{name: "its subject revoked exactly the leeway before its iat: the clocks may disagree",
		read: []Event{sub("alice", -time.Minute)}, q: token("1", -time.Minute+leeway), log: Unknown, feed: Unknown},
	{name: "its subject revoked the leeway and a ms after the end of its iat's second",
		read: []Event{sub("alice", -time.Minute+time.Second+leeway)}, q: token("1", -time.Minute), log: Unknown, feed: Revoked},
	{name: "its subject revoked the leeway after the end of its iat's second: the clocks may disagree",
		read: []Event{sub("alice", -time.Minute+time.Second-time.Millisecond+leeway)}, q: token("1", -time.Minute), log: Unknown, feed: Unknown},
	{name: "its subject revoked in the full read, checked after it",
		checked: true, read: []Event{sub("alice", -2*time.Minute)}, q: token("1", -time.Minute), log: Live, feed: Live},
	{name: "its subject revoked after the mark",
		checked: true, after: []Event{sub("alice", -time.Second)}, q: token("1", -time.Minute), log: Unknown, feed: Revoked},
	{name: "another subject revoked after the mark",
		checked: true, after: []Event{sub("bob", -time.Second)}, q: token("1", -time.Minute), log: Live, feed: Live},
	{name: "a subject revoked past the retention: let go",
		forget: true, read: []Event{sub("alice", -2*time.Hour)}, q: token("1", -2*time.Hour+time.Second), log: Live, feed: Unknown},
	{name: "a subject revoked past the retention, a token issued well after",
		forget: true, read: []Event{sub("alice", -2*time.Hour)}, q: token("1", -time.Minute), log: Live, feed: Live},
	{name: "a token revoked here",
		notes: func(s *State) { s.NoteToken("1", inAnHour, now) }, q: token("1", -time.Minute), log: Revoked, feed: Revoked},
	{name: "its subject revoked here after the mark",
		checked: true, notes: func(s *State) { s.NoteSubject("alice", now) }, q: token("1", -time.Minute), log: Unknown, feed: Revoked},
	{name: "its client revoked here",
		notes: func(s *State) { s.NoteClient("gw", ms(0), now) }, q: token("1", -time.Minute), log: Revoked, feed: Revoked},

	// The cascade: an exchanged token and its parents (nearest first), each
	// judged as a token of its own on its own issued time.
	{name: "exchanged, it and its parents live",
		q:   exchanged(token("3", -time.Minute), parent("2", "web", -2*time.Minute), parent("1", "web", -3*time.Minute)),
		log: Live, feed: Live},
	{name: "exchanged, its parent revoked by jti",
		read: []Event{tok("2", inAnHour, -30*time.Second)},
		q:    child, log: Revoked, feed: Revoked},
	{name: "exchanged, its parent revoked by jti, stale: the consumer keeps what it knows",
		stale: true, read: []Event{tok("2", inAnHour, -30*time.Second)},
		q: child, log: Unknown, feed: Revoked},
	{name: "exchanged, its grandparent revoked by jti",
		read: []Event{tok("1", inAnHour, -30*time.Second)},
		q:    exchanged(token("3", -time.Minute), parent("2", "web", -2*time.Minute), parent("1", "web", -3*time.Minute)),
		log:  Revoked, feed: Revoked},
	{name: "exchanged, its parent revoked here",
		notes: func(s *State) { s.NoteToken("2", inAnHour, now) },
		q:     child, log: Revoked, feed: Revoked},
	{name: "exchanged, its parent's client cut off after the parent was issued, before the token was: the parent's own time counts",
		read: []Event{cli("web", ms(-90*time.Second), -90*time.Second)},
		q:    child, log: Revoked, feed: Revoked},
	{name: "exchanged, its parent's client cut off well before the parent was issued",
		read: []Event{cli("web", ms(-3*time.Minute), -3*time.Minute)},
		q:    child, log: Live, feed: Live},
	{name: "exchanged, its parent's client cut off at the very ms the parent was issued",
		read: []Event{cli("web", ms(-2*time.Minute), -2*time.Minute)},
		q:    child, log: Revoked, feed: Unknown},
	{name: "exchanged, its own client cut off: the parent's client is another",
		read: []Event{cli("gw", ms(-30*time.Second), -30*time.Second)},
		q:    child, log: Revoked, feed: Revoked},
	{name: "exchanged, its subject revoked after the parent was issued, before the token was: the parent's own time counts",
		read: []Event{sub("alice", -90*time.Second)},
		q:    child, log: Unknown, feed: Revoked},
	{name: "exchanged, its subject revoked after the mark: only Redis's markers tell the issuer",
		checked: true, after: []Event{sub("alice", -time.Second)},
		q: child, log: Unknown, feed: Revoked},
	{name: "exchanged, another subject revoked after the mark",
		checked: true, after: []Event{sub("bob", -time.Second)},
		q: child, log: Live, feed: Live},
	{name: "exchanged, its parent issued before the horizon: unknown",
		q:   exchanged(token("3", -time.Minute), parent("2", "web", -4*time.Hour)),
		log: Unknown, feed: Unknown},
	{name: "exchanged, its parent issued before the horizon, checked live by Redis: the mark vouches for it",
		checked: true, q: exchanged(token("3", -time.Minute), parent("2", "web", -4*time.Hour)),
		log: Live, feed: Unknown},
	{name: "exchanged, one parent unknown, another revoked: revoked",
		read: []Event{tok("1", inAnHour, -30*time.Second)},
		q:    exchanged(token("3", -time.Minute), parent("2", "web", -4*time.Hour), parent("1", "web", -5*time.Hour)),
		log:  Revoked, feed: Revoked},
	{name: "exchanged, the token itself revoked, its parents live",
		read: []Event{tok("3", inAnHour, -30*time.Second)},
		q:    child, log: Revoked, feed: Revoked},
	{name: "exchanged, stale, nothing revoked",
		stale: true, q: child, log: Unknown, feed: Unknown},
}

// build makes c's state, and c's query with its mark.
func (c decisionCase) build(t *testing.T) (*State, Query) {
	t.Helper()
	s, err := NewState(Options{Leeway: leeway, Retention: time.Hour}, epoch, horizon)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	apply := func(evs []Event) {
		for _, ev := range evs {
			n++
			ev.ID = fmt.Sprintf("%s-%d-%d", epoch, ms(-5*time.Hour)+int64(n), 0)
			if err := s.Apply(ev, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	apply(c.read)
	if !c.unsynced {
		s.Adopt(nil, now)
	}
	q := c.q
	if c.checked {
		q.Checked = s.Mark()
	}
	apply(c.after)
	if c.notes != nil {
		c.notes(s)
	}
	if c.forget {
		s.Forget(now)
	}
	if !c.stale {
		s.Heard(now.Add(-10*time.Millisecond), 100*time.Millisecond)
	}
	return s, q
}

// TestDecide runs each rule, the issuer's (DecideLog) and the consuming
// service's (DecideFeed), against the one table.
func TestDecide(t *testing.T) {
	for _, rule := range []struct {
		name   string
		decide func(*State, time.Time, Query) Verdict
		want   func(decisionCase) Verdict
	}{
		{"DecideLog", (*State).DecideLog, func(c decisionCase) Verdict { return c.log }},
		{"DecideFeed", (*State).DecideFeed, func(c decisionCase) Verdict { return c.feed }},
	} {
		for _, c := range cases {
			t.Run(rule.name+"/"+c.name, func(t *testing.T) {
				s, q := c.build(t)
				if got := rule.decide(s, now, q); got != rule.want(c) {
					t.Errorf("%s = %v, want %v", rule.name, got, rule.want(c))
				}
			})
		}
	}
}

// TestDecideAllocatesNothing: deciding, on either side, costs no
// allocation (validation's hot path).
func TestDecideAllocatesNothing(t *testing.T) {
	s, q := cases[0].build(t)
	var parents [4]Parent // as a validator passes them: from its stack, or kept with the token
	for i := range parents {
		parents[i] = parent(fmt.Sprint(10+i), "web", -time.Duration(i+2)*time.Minute)
	}
	for _, q := range []Query{q, exchanged(q, parents[:]...)} {
		if n := testing.AllocsPerRun(100, func() { s.DecideLog(now, q); s.DecideFeed(now, q) }); n != 0 {
			t.Errorf("%d parents: %v allocations a decision", len(q.Parents), n)
		}
	}
}

// BenchmarkDecide is each rule on a fresh state that holds entries of
// other tokens, for a token and for an exchanged token with four parents.
func BenchmarkDecide(b *testing.B) {
	s, err := NewState(Options{Leeway: leeway, Retention: time.Hour}, epoch, horizon)
	if err != nil {
		b.Fatal(err)
	}
	s.Adopt(nil, now)
	s.NoteToken("7", inAnHour, now)
	s.NoteClient("other", ms(-time.Minute), now)
	s.Heard(now, time.Second)
	q := token("1", -time.Minute)
	var parents [4]Parent
	for i := range parents {
		parents[i] = parent(fmt.Sprint(10+i), "web", -time.Duration(i+2)*time.Minute)
	}
	for _, bc := range []struct {
		name string
		q    Query
	}{{"token", q}, {"exchanged4", exchanged(q, parents[:]...)}} {
		for _, rule := range []struct {
			name   string
			decide func(*State, time.Time, Query) Verdict
		}{{"log", (*State).DecideLog}, {"feed", (*State).DecideFeed}} {
			b.Run(bc.name+"/"+rule.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if rule.decide(s, now, bc.q) != Live {
						b.Fatal("not live")
					}
				}
			})
		}
	}
}
