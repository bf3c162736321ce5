package revlog

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/revocation"
	"github.com/snowtoken/snowtoken/internal/clocktest"
	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/redisstore"
)

// TestDecide: each rule of token.Revocations, on a real follower of a real
// log: a revoked jti and a client's cutoff refuse; a subject with an entry
// needs Redis unless a Redis check marked after the entry; a token issued
// before the horizon and the leeway needs Redis; a stale follower decides
// nothing.
func TestDecide(t *testing.T) {
	rg := sharedRig(t, Options{})
	rg.start(t)
	rg.waitFresh(t)
	st := rg.f.Status(time.Now())
	issued := st.Horizon + token.DefaultLeeway.Milliseconds() + 1
	q := func(jti, sub, client string, issued int64, checked token.LogMark) token.LogVerdict {
		return rg.f.Decide(time.Now(), token.LogQuery{JTI: jti, Subject: sub, Client: client, Issued: issued, Checked: checked})
	}
	if v := q("1", "alice", "gw", issued, 0); v != token.LogLive {
		t.Fatalf("a token nothing covers: %v, want LogLive", v)
	}
	if v := q("1", "alice", "gw", st.Horizon, 0); v != token.LogUnknown {
		t.Errorf("a token issued at the horizon: %v, want LogUnknown", v)
	}

	rg.revokeToken(t, "alice", "11", time.Now().Add(time.Hour).Unix())
	cut := time.Now().Add(time.Hour)
	if err := rg.store.RevokeClient(t.Context(), "gw2", cut); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "both followed", func() bool { _, ok := rg.f.ClientCutoff("gw2"); return rg.f.TokenRevoked("11") && ok })
	rg.waitFresh(t)
	if v := q("11", "alice", "gw", issued, 0); v != token.LogRevoked {
		t.Errorf("a revoked jti: %v, want LogRevoked", v)
	}
	if v := q("12", "alice", "gw2", cut.UnixMilli(), 0); v != token.LogRevoked {
		t.Errorf("a token at its client's cutoff: %v, want LogRevoked", v)
	}
	if v := q("12", "alice", "gw2", cut.UnixMilli()+1, 0); v != token.LogLive {
		t.Errorf("a token after its client's cutoff: %v, want LogLive", v)
	}

	before := rg.f.Mark()
	rg.revokeSubject(t, "bob")
	eventually(t, 5*time.Second, "bob followed", func() bool { _, ok := rg.f.SubjectMarker("bob"); return ok })
	rg.waitFresh(t)
	after := rg.f.Mark()
	if after <= before {
		t.Fatalf("Mark %d after an entry, %d before", after, before)
	}
	for _, c := range []struct {
		checked token.LogMark
		want    token.LogVerdict
	}{{0, token.LogUnknown}, {before, token.LogUnknown}, {after, token.LogLive}} {
		if v := q("13", "bob", "gw", issued, c.checked); v != c.want {
			t.Errorf("bob's token checked at %d (entry between %d and %d): %v, want %v", c.checked, before, after, v, c.want)
		}
	}

	rg.stopW()
	eventually(t, 5*time.Second, "stale", func() bool { return !rg.f.Fresh(time.Now()) })
	if v := q("11", "alice", "gw", issued, 0); v != token.LogUnknown {
		t.Errorf("a stale follower: %v, want LogUnknown", v)
	}
}

// TestMarksDoNotSurviveAFullRead: a mark taken before a resync vouches for
// nothing after it (the resync may follow a loss).
func TestMarksDoNotSurviveAFullRead(t *testing.T) {
	rg, _ := serverRig(t, Options{}) // its own redis-server: CLIENT KILL
	rg.revokeSubject(t, "alice")
	rg.start(t)
	rg.waitFresh(t)
	m := rg.f.Mark()
	issued := time.Now().Add(time.Minute).UnixMilli()
	if v := rg.f.Decide(time.Now(), token.LogQuery{JTI: "1", Subject: "alice", Issued: issued, Checked: m}); v != token.LogLive {
		t.Fatalf("checked at the current mark: %v, want LogLive", v)
	}
	n := rg.resyncs(ReasonError)
	if err := rg.rdb.Do(t.Context(), "client", "kill", "type", "normal").Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "an error resync", func() bool { return rg.resyncs(ReasonError) > n })
	rg.waitFresh(t)
	if v := rg.f.Decide(time.Now(), token.LogQuery{JTI: "1", Subject: "alice", Issued: issued, Checked: m}); v != token.LogUnknown {
		t.Errorf("checked before the resync: %v, want LogUnknown", v)
	}
}

// TestEntriesLostWithTheEpoch: the log set back to an earlier copy of
// itself (DUMP, then RESTORE: what a failover to a replica that lacked the
// last writes, or an AOF that lost its last second, leaves) while the
// epoch key stays. The follower that had applied the lost entries keeps
// them, rotates the epoch (so every follower resyncs and moves its
// horizon), and goes fresh again.
func TestEntriesLostWithTheEpoch(t *testing.T) {
	var store *redisstore.Store
	rg := sharedRig(t, Options{Redo: func(ctx context.Context, ev revocation.Event) error {
		if ev.Kind != revocation.KindToken {
			return fmt.Errorf("redo of a %s", ev.Kind)
		}
		return store.RelogToken(ctx, ev.Key, ev.Exp)
	}})
	store = rg.store
	ctx := t.Context()
	rg.revokeToken(t, "alice", "21", time.Now().Add(time.Hour).Unix())
	rg.start(t)
	rg.waitFresh(t)
	dump, err := rg.rdb.Dump(ctx, rg.store.LogKey()).Result()
	if err != nil {
		t.Fatal(err)
	}
	epoch := rg.f.Status(time.Now()).Epoch
	rg.revokeToken(t, "alice", "22", time.Now().Add(time.Hour).Unix())
	eventually(t, 5*time.Second, "22 followed", func() bool { return rg.f.TokenRevoked("22") })
	n := rg.resyncs(ReasonLoss)
	if err := rg.rdb.RestoreReplace(ctx, rg.store.LogKey(), 0, dump).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "a loss resync", func() bool { return rg.resyncs(ReasonLoss) > n })
	eventually(t, 5*time.Second, "a new epoch, fresh", func() bool {
		st := rg.f.Status(time.Now())
		return st.Fresh && st.Epoch != epoch
	})
	st := rg.f.Status(time.Now())
	if st.Epoch == epoch || !strings.Contains(st.Epoch, ".") {
		t.Errorf("epoch %q after the loss, %q before: want a new one", st.Epoch, epoch)
	}
	if !rg.f.TokenRevoked("22") {
		t.Error("the lost revocation forgotten")
	}
	if v := rg.f.Decide(time.Now(), token.LogQuery{JTI: "23", Subject: "bob", Issued: time.Now().UnixMilli()}); v != token.LogUnknown {
		t.Errorf("a token issued before the new horizon: %v, want LogUnknown (Redis)", v)
	}
	// A follower that starts now (it never saw 22) also moves its horizon,
	// and hears of 22 again: the first follower wrote it again (Redo).
	f2, err := New(rg.client(), rg.store.LogKey(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	goRun(t, f2.Run)
	eventually(t, 5*time.Second, "f2 fresh", func() bool { return f2.Fresh(time.Now()) })
	if got := f2.Status(time.Now()).Epoch; got != st.Epoch {
		t.Errorf("f2's epoch %q, want %q", got, st.Epoch)
	}
	eventually(t, 5*time.Second, "f2 knows the lost revocation", func() bool { return f2.TokenRevoked("22") })
	if f2.TokenRevoked("21") != true {
		t.Error("f2 lacks 21, which the log kept")
	}
}

// TestSinceResumes: Since returns the events after an ID of the current
// epoch, nothing after the last, and refuses another epoch or an ID that
// does not parse; the snapshot holds what the events said.
func TestSinceResumes(t *testing.T) {
	rg := sharedRig(t, Options{})
	rg.start(t)
	rg.waitFresh(t)
	st := rg.f.Status(time.Now())
	rg.revokeToken(t, "alice", "31", time.Now().Add(time.Hour).Unix())
	rg.revokeSubject(t, "bob")
	cut := time.Now().Add(time.Minute)
	if err := rg.store.RevokeClient(t.Context(), "gw", cut); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "all followed", func() bool { _, ok := rg.f.ClientCutoff("gw"); return ok })
	evs, ok := rg.f.Since(st.Last, 10)
	if !ok || len(evs) != 3 {
		t.Fatalf("Since(%s) = %v, %v; want 3 events", st.Last, evs, ok)
	}
	want := []struct {
		kind revocation.Kind
		key  string
	}{{revocation.KindToken, "31"}, {revocation.KindSubject, "bob"}, {revocation.KindClient, "gw"}}
	for i, w := range want {
		if evs[i].Kind != w.kind || evs[i].Key != w.key || !strings.HasPrefix(evs[i].ID, st.Epoch+"-") {
			t.Errorf("event %d = %+v, want %s %s in epoch %s", i, evs[i], w.kind, w.key, st.Epoch)
		}
	}
	if evs[2].Cutoff != cut.UnixMilli() {
		t.Errorf("cutoff %d, want %d", evs[2].Cutoff, cut.UnixMilli())
	}
	if rest, ok := rg.f.Since(evs[0].ID, 1); !ok || len(rest) != 1 || rest[0].ID != evs[1].ID {
		t.Errorf("Since the first, max 1 = %v, %v; want the second", rest, ok)
	}
	if rest, ok := rg.f.Since(evs[2].ID, 10); !ok || len(rest) != 0 {
		t.Errorf("Since the last = %v, %v; want none, ok", rest, ok)
	}
	for _, bad := range []string{"", "x", "other.1-1-0", strings.Replace(evs[0].ID, st.Epoch, st.Epoch+"0", 1)} {
		if _, ok := rg.f.Since(bad, 10); ok {
			t.Errorf("Since(%q) resumes, want a reset", bad)
		}
	}
	sn := rg.f.Snapshot(time.Now())
	if len(sn.Tokens) != 1 || len(sn.Subjects) != 1 || len(sn.Clients) != 1 || sn.Last != evs[2].ID {
		t.Errorf("snapshot %+v, want one of each, last %s", sn, evs[2].ID)
	}
}

// TestSnapshotVersion: Status.Version grows with every change of what
// Snapshot holds (an entry applied, a revocation noted here, one forgotten,
// a resync) and stays put over heartbeats, so that the feed may serve the
// snapshot it built for a Version until the Version moves.
func TestSnapshotVersion(t *testing.T) {
	clock := clocktest.New(time.Now())
	rg := sharedRig(t, Options{Now: clock.Now, Leeway: 5 * time.Second})
	rg.start(t)
	rg.waitFresh(t)
	v := rg.f.Status(clock.Now()).Version
	moved := func(what string) {
		t.Helper()
		if got := rg.f.Status(clock.Now()).Version; got <= v {
			t.Fatalf("%s: Version %d, was %d", what, got, v)
		}
		v = rg.f.Status(clock.Now()).Version
	}
	for range 3 { // three reads, each with a heartbeat at least
		select {
		case <-rg.f.Changed():
		case <-time.After(5 * time.Second):
			t.Fatal("no read")
		}
	}
	if got := rg.f.Status(clock.Now()).Version; got != v {
		t.Fatalf("Version %d after heartbeats alone, was %d", got, v)
	}
	rg.revokeToken(t, "alice", "51", clock.Now().Add(time.Minute).Unix())
	eventually(t, 5*time.Second, "51 followed", func() bool { return rg.f.TokenRevoked("51") })
	moved("an entry applied")
	rg.f.TokenRevokedHere("52", clock.Now().Add(time.Hour).Unix())
	moved("a token revoked here")
	rg.f.SubjectRevokedHere("bob")
	moved("a subject revoked here")
	rg.f.ClientRevokedHere("gw", clock.Now().UnixMilli())
	moved("a client revoked here")
	clock.Add(time.Minute + 7*time.Second)
	eventually(t, 5*time.Second, "51 forgotten", func() bool { return !rg.f.TokenRevoked("51") })
	moved("a token forgotten")
	epoch := rg.f.Status(clock.Now()).Epoch
	if err := rg.rdb.Del(t.Context(), rg.store.LogKey()+":epoch").Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "a new epoch", func() bool { return rg.f.Status(clock.Now()).Epoch != epoch })
	moved("a resync")
}

// TestRevokedHere: a subject or client this replica revoked is decided as
// revoked (or left to Redis) at once, before the entry comes back; the
// entry then takes the local note's place.
func TestRevokedHere(t *testing.T) {
	rg := sharedRig(t, Options{})
	rg.start(t)
	rg.waitFresh(t)
	issued := time.Now().Add(time.Minute).UnixMilli()
	m := rg.f.Mark()
	q := token.LogQuery{JTI: "41", Subject: "erin", Client: "gw", Issued: issued, Checked: m}
	if v := rg.f.Decide(time.Now(), q); v != token.LogLive {
		t.Fatalf("before: %v, want LogLive", v)
	}
	rg.f.TokenRevokedHere("41", time.Now().Add(time.Hour).Unix())
	if v := rg.f.Decide(time.Now(), q); v != token.LogRevoked {
		t.Errorf("a token revoked here: %v, want LogRevoked", v)
	}
	q.JTI = "42"
	rg.f.SubjectRevokedHere("erin")
	if v := rg.f.Decide(time.Now(), q); v != token.LogUnknown {
		t.Errorf("a subject revoked here, checked before: %v, want LogUnknown", v)
	}
	rg.f.ClientRevokedHere("gw", issued)
	if v := rg.f.Decide(time.Now(), q); v != token.LogRevoked {
		t.Errorf("a client revoked here: %v, want LogRevoked", v)
	}
	marker := rg.revokeSubject(t, "erin")
	eventually(t, 5*time.Second, "the entry replaces the note", func() bool { got, _ := rg.f.SubjectMarker("erin"); return got == marker })
}

// TestWriterSilentWhileHeard: a Writer that does not hold the writer key
// runs no script while its replica hears heartbeats (WriterOptions.Heard),
// and takes over once it hears none.
func TestWriterSilentWhileHeard(t *testing.T) {
	r := redistest.New(t)
	logKey := r.Prefix + "{revlog}"
	var heard atomic.Bool
	var asked atomic.Int32 // Heard is asked once a period
	heard.Store(true)
	w, err := NewWriter(r.Client, logKey, WriterOptions{Period: 5 * time.Millisecond, Heard: func(time.Duration) bool {
		asked.Add(1)
		return heard.Load()
	}})
	if err != nil {
		t.Fatal(err)
	}
	stop := goRun(t, w.Run)
	eventually(t, 5*time.Second, "ten periods", func() bool { return asked.Load() >= 10 })
	if n, err := r.Client.Exists(t.Context(), logKey+":hb", logKey+":writer").Result(); err != nil || n != 0 {
		t.Fatalf("%d keys written while heard (%v), want none", n, err)
	}
	heard.Store(false)
	eventually(t, 5*time.Second, "a heartbeat once none is heard", func() bool {
		n, _ := r.Client.XLen(t.Context(), logKey+":hb").Result()
		return n > 0
	})
	stop()
}

// TestNotesDuringFullReads: local notes (a revoke at this replica) while
// full reads run: no data race with the merge, and none is lost.
func TestNotesDuringFullReads(t *testing.T) {
	rg := sharedRig(t, Options{})
	var stop atomic.Bool
	var noted atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; !stop.Load(); i++ {
			rg.f.TokenRevokedHere(fmt.Sprint("note", i), time.Now().Add(time.Hour).Unix())
			noted.Store(int64(i + 1))
		}
	}()
	for range 50 {
		if _, err := rg.f.sync(t.Context(), ReasonError); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	<-done
	for i := range noted.Load() {
		if !rg.f.TokenRevoked(fmt.Sprint("note", i)) {
			t.Fatalf("note %d lost in a full read", i)
		}
	}
}
