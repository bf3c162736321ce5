package revlog

import (
	"errors"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/revocation"
	"github.com/snowtoken/snowtoken/internal/clocktest"
	"github.com/snowtoken/snowtoken/token"
)

// TestLocal: a Local's own revocations are events of its epoch, in order
// even within one millisecond, which the feed resumes from and validation
// decides by; it is fresh only from a beat, for Threshold.
func TestLocal(t *testing.T) {
	start := time.UnixMilli(1_795_710_800_000)
	clock := clocktest.New(start)
	l, err := NewLocal(LocalOptions{Now: clock.Now, Horizon: start.Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	st := l.Status(clock.Now())
	if st.Fresh || st.Horizon != start.Add(-time.Minute).UnixMilli() || st.Last != st.Epoch+"-0-0" {
		t.Fatalf("a new Local: %+v", st)
	}
	changed := l.Changed()
	l.TokenRevokedHere("1", start.Add(time.Hour).Unix())
	l.SubjectRevokedHere("alice")
	clock.Add(time.Millisecond)
	l.ClientRevokedHere("gw", start.UnixMilli())
	select {
	case <-changed:
	default:
		t.Error("Changed not closed by a revocation")
	}
	evs, ok := l.Since(st.Last, 10)
	if !ok || len(evs) != 3 {
		t.Fatalf("Since(%s) = %v, %v", st.Last, evs, ok)
	}
	want := []string{st.Epoch + "-1795710800000-0", st.Epoch + "-1795710800000-1", st.Epoch + "-1795710800001-0"}
	for i, ev := range evs {
		if ev.ID != want[i] {
			t.Errorf("event %d: %s, want %s", i, ev.ID, want[i])
		}
	}
	if evs[2].Kind != revocation.KindClient || evs[2].Cutoff != start.UnixMilli() || evs[0].Exp != start.Add(time.Hour).Unix() {
		t.Errorf("events %+v", evs)
	}
	q := token.LogQuery{JTI: "2", Subject: "bob", Client: "other", Issued: start.UnixMilli()}
	if v := l.Decide(clock.Now(), q); v != token.LogUnknown {
		t.Errorf("before a beat: %v, want unknown", v)
	}
	l.beat()
	if v := l.Decide(clock.Now(), q); v != token.LogLive {
		t.Errorf("after a beat: %v, want live", v)
	}
	q.JTI = "1"
	if v := l.Decide(clock.Now(), q); v != token.LogRevoked {
		t.Errorf("a token revoked here: %v, want revoked", v)
	}
	clock.Add(DefaultThreshold)
	if l.Fresh(clock.Now()) {
		t.Error("fresh past Threshold without a beat")
	}
	sn := l.Snapshot(clock.Now())
	if len(sn.Tokens) != 1 || len(sn.Subjects) != 1 || len(sn.Clients) != 1 || sn.Last != want[2] {
		t.Errorf("Snapshot = %+v", sn)
	}
	if _, err := NewLocal(LocalOptions{Period: -1}); !errors.Is(err, ErrOptions) {
		t.Errorf("a negative period: %v", err)
	}
}
