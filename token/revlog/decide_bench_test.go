package revlog

import (
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/revocation"
	"github.com/snowtoken/snowtoken/token"
)

// BenchmarkDecide is validation's hot path through a fresh follower: one
// Decide under the read lock, no Redis (the state is swapped in by hand).
func BenchmarkDecide(b *testing.B) {
	f, now := benchFollower(b)
	q := token.LogQuery{JTI: "1", Subject: "alice", Client: "gw", Issued: now.Add(-time.Minute).UnixMilli()}
	benchDecide(b, f, now, q)
}

// BenchmarkDecideExchanged is BenchmarkDecide for an exchanged token with
// parents at the cap (the cascade: each judged as a token of its own).
func BenchmarkDecideExchanged(b *testing.B) {
	f, now := benchFollower(b)
	q := token.LogQuery{JTI: "1", Subject: "alice", Client: "gw", Issued: now.Add(-time.Minute).UnixMilli(),
		Parents: []revocation.Parent{
			{JTI: "2", Client: "web", Issued: now.Add(-2 * time.Minute).UnixMilli()},
			{JTI: "3", Client: "web", Issued: now.Add(-3 * time.Minute).UnixMilli()},
			{JTI: "4", Client: "gw", Issued: now.Add(-4 * time.Minute).UnixMilli()},
			{JTI: "5", Client: "web", Issued: now.Add(-5 * time.Minute).UnixMilli()},
		}}
	benchDecide(b, f, now, q)
}

// benchDecide measures f.Decide of q, which must be live.
func benchDecide(b *testing.B, f *Follower, now time.Time, q token.LogQuery) {
	b.ReportAllocs()
	for b.Loop() {
		if f.Decide(now, q) != token.LogLive {
			b.Fatal("not live")
		}
	}
}

// benchFollower is a fresh follower that holds a token's and a client's
// revocation, and the time it is fresh at.
func benchFollower(b *testing.B) (*Follower, time.Time) {
	f, err := New(nil, "st:{revlog}", Options{})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	st, err := f.newState("0123456789abcdef0123456789abcdef.1", now.Add(-time.Hour).UnixMilli())
	if err != nil {
		b.Fatal(err)
	}
	f.swap(st, now)
	f.TokenRevokedHere("7", now.Add(time.Hour).Unix())
	f.ClientRevokedHere("other", now.Add(-time.Minute).UnixMilli())
	f.mu.Lock()
	f.st.core.Heard(now, f.opts.Threshold)
	f.mu.Unlock()
	return f, now
}
