package revocation

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestParseEventID: the one parser of event IDs, strict.
func TestParseEventID(t *testing.T) {
	id, err := ParseEventID(epoch + "-1795700000001-3")
	if err != nil || id.Epoch != epoch || id.StreamID != (StreamID{1795700000001, 3}) || id.String() != epoch+"-1795700000001-3" {
		t.Fatalf("ParseEventID = %+v, %v", id, err)
	}
	for _, bad := range []string{"", "-1-2", "e1-1", "e1-1-", "e1--2", "E1-1-2", "e 1-1-2", "e1-1-2-3", "e1-+1-2", "e1-1-18446744073709551616", "e1-01-2", "e1-1-00", "e1-1_0-2",
		epoch + epoch + "-1-2"} {
		if _, err := ParseEventID(bad); !errors.Is(err, ErrEventID) {
			t.Errorf("ParseEventID(%q) = %v, want ErrEventID", bad, err)
		}
	}
	a, b := StreamID{1, 9}, StreamID{2, 0}
	if !a.Less(b) || b.Less(a) || a.Compare(a) != 0 || b.Compare(a) != 1 {
		t.Error("stream IDs out of order")
	}
}

func newTestState(t *testing.T) *State {
	t.Helper()
	s, err := NewState(Options{Leeway: leeway, Retention: time.Hour}, epoch, horizon)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func id(n int) string { return fmt.Sprintf("%s-%d-0", epoch, ms(-time.Hour)+int64(n)) }

// FuzzParseEventID: an ID that parses has one spelling, its String.
func FuzzParseEventID(f *testing.F) {
	for _, s := range []string{epoch + "-1795700000001-3", "e1-0-0", "e1-01-0", "-1-2", "e1-1-2-3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseEventID(s)
		if err == nil && id.String() != s {
			t.Fatalf("ParseEventID(%q) = %s", s, id)
		}
	})
}

// TestApplyRefuses: an event of another epoch, out of order or of no kind
// changes nothing.
func TestApplyRefuses(t *testing.T) {
	s := newTestState(t)
	if err := s.Apply(Event{ID: id(2), Kind: KindToken, Key: "1", At: ms(-time.Hour)}, now); err != nil {
		t.Fatal(err)
	}
	for _, ev := range []Event{
		{ID: id(1), Kind: KindToken, Key: "2"},
		{ID: id(2), Kind: KindToken, Key: "2"},
		{ID: "ab.1-9999999999999-0", Kind: KindToken, Key: "2"},
		{ID: id(3), Kind: "x", Key: "2"},
		{ID: "not an id", Kind: KindToken, Key: "2"},
	} {
		if err := s.Apply(ev, now); !errors.Is(err, ErrEvent) {
			t.Errorf("Apply(%+v) = %v, want ErrEvent", ev, err)
		}
	}
	if s.TokenRevoked("2") || s.Last().String() != id(2) {
		t.Errorf("a refused event changed the state: last %s", s.Last())
	}
	if _, err := NewState(Options{Leeway: -1}, epoch, 0); !errors.Is(err, ErrOptions) {
		t.Errorf("a negative leeway: %v", err)
	}
}

// TestForgetsOldSubjectsAndClients: a subject's or client's entry older
// than the retention covers only expired tokens: it is dropped.
func TestForgetsOldSubjectsAndClients(t *testing.T) {
	s := newTestState(t)
	s.subjects["old"] = subjectEntry{at: ms(-2 * time.Hour)}
	s.subjects["new"] = subjectEntry{at: ms(-30 * time.Minute)}
	s.clients["old"] = clientEntry{at: ms(-2 * time.Hour), cutoff: ms(-2 * time.Hour)}
	s.clients["new"] = clientEntry{at: ms(-2 * time.Hour), cutoff: ms(0)}
	s.tokens["gone"], s.tokens["kept"] = now.Unix(), now.Unix()+1
	if !s.Forget(now) {
		t.Error("Forget reports nothing dropped")
	}
	for name, ok := range map[string]bool{"old subject": !has(s.subjects, "old"), "old client": !has(s.clients, "old"),
		"new subject": has(s.subjects, "new"), "recent cutoff": has(s.clients, "new"),
		"expired token": !s.TokenRevoked("gone"), "token": s.TokenRevoked("kept")} {
		if !ok {
			t.Errorf("%s: kept or dropped wrongly", name)
		}
	}
	if s.forgotten != ms(-2*time.Hour) {
		t.Errorf("forgotten %d, want the old subject's time", s.forgotten)
	}
	s.subjects["old"] = subjectEntry{at: ms(-2 * time.Hour)}
	if s.Forget(now.Add(500 * time.Millisecond)) {
		t.Error("a second Forget within the second scanned")
	}
}

func has[V any](m map[string]V, k string) bool { _, ok := m[k]; return ok }

// TestMarkDuringResyncVoid: a mark taken of the state before a full read,
// after a local note moved it on while the read ran, vouches for nothing
// after Adopt.
func TestMarkDuringResyncVoid(t *testing.T) {
	prev := newTestState(t)
	prev.Adopt(nil, now)
	next := newTestState(t) // what a full read builds
	if err := next.Apply(sub("alice", -time.Minute), now); err == nil {
		t.Fatal("an event without an ID applied")
	}
	ev := sub("alice", -time.Minute)
	ev.ID = id(1)
	if err := next.Apply(ev, now); err != nil {
		t.Fatal(err)
	}
	prev.NoteSubject("bob", now) // meanwhile, on the state in force
	m := prev.Mark()
	next.Adopt(prev, now)
	if m >= next.start {
		t.Errorf("a mark of the old state (%d) is valid in the new one (start %d)", m, next.start)
	}
	if !has(next.subjects, "bob") || !next.subjects["bob"].local {
		t.Error("the local note was not carried over")
	}
	next.Heard(now, time.Second)
	if v := next.DecideLog(now, Query{Subject: "carol", Issued: ms(0), Checked: m}); v != Live {
		// carol has no entry and the token is after the horizon: Live either way
		t.Errorf("DecideLog = %v", v)
	}
	if v := next.DecideLog(now, Query{Subject: "alice", Issued: ms(0), Checked: m}); v != Unknown {
		t.Errorf("a mark of the old state vouched for a subject with an entry: %v", v)
	}
}

// TestAdoptKeepsRevocations: a full read never undoes what the state
// before it knew.
func TestAdoptKeepsRevocations(t *testing.T) {
	prev := newTestState(t)
	prev.NoteToken("1", inAnHour, now)
	prev.NoteClient("gw", ms(0), now)
	next := newTestState(t)
	next.Adopt(prev, now)
	if c, ok := next.ClientCutoff("gw"); !next.TokenRevoked("1") || !ok || c != ms(0) {
		t.Error("a revocation lost at a full read")
	}
}

// TestFromSnapshot: a consumer's state from the feed's snapshot holds its
// revocations, is synced and not fresh.
func TestFromSnapshot(t *testing.T) {
	sn := SnapshotState{Epoch: epoch, Last: id(7), Horizon: horizon,
		Tokens:   []RevokedToken{{JTI: "1", Exp: inAnHour}, {JTI: "2"}, {JTI: "old", Exp: now.Add(-time.Hour).Unix()}},
		Subjects: []RevokedName{{Subject: "alice", At: ms(-time.Minute)}},
		Clients:  []RevokedClient{{ClientID: "gw", Cutoff: ms(-time.Minute), At: ms(-time.Minute)}}}
	s, err := FromSnapshot(Options{Leeway: leeway, Retention: time.Hour}, sn, now)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Synced() || s.Fresh(now) || s.Last().String() != id(7) || s.Horizon() != horizon {
		t.Errorf("synced %v, fresh %v, last %s", s.Synced(), s.Fresh(now), s.Last())
	}
	if !s.TokenRevoked("1") || !s.TokenRevoked("2") || s.TokenRevoked("old") {
		t.Error("tokens: a revoked one missing, or an expired one kept")
	}
	if v := s.DecideFeed(now, token("3", -2*time.Minute)); v != Revoked {
		t.Errorf("a token of a revoked subject: %v", v)
	}
	sn.Last = "ff-1-0"
	if _, err := FromSnapshot(Options{}, sn, now); !errors.Is(err, ErrEvent) {
		t.Errorf("a last of another epoch: %v", err)
	}
}

// TestRing: Since resumes after an ID it keeps, and refuses another epoch,
// an ID past the last, or one older than it keeps.
func TestRing(t *testing.T) {
	var r Ring
	n := 2*RingSize + 1
	for i := 1; i <= n; i++ {
		eid, _ := ParseEventID(id(i))
		r.Record(Event{ID: id(i)}, eid.StreamID)
	}
	last, _ := ParseEventID(id(n))
	after, _ := ParseEventID(id(n - 3))
	evs, ok := r.Since(after, last, 2)
	if !ok || len(evs) != 2 || evs[0].ID != id(n-2) || evs[1].ID != id(n-1) {
		t.Fatalf("Since = %v, %v", evs, ok)
	}
	if evs := r.After(after.StreamID); len(evs) != 3 {
		t.Errorf("After = %d events, want 3", len(evs))
	}
	old, _ := ParseEventID(id(1))
	other := after
	other.Epoch = "ab"
	future, _ := ParseEventID(id(n + 1))
	for _, a := range []EventID{old, other, future} {
		if _, ok := r.Since(a, last, 10); ok {
			t.Errorf("Since(%s) resumed", a)
		}
	}
}
