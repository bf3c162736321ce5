package revlog

import (
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/token"
)

// BenchmarkDecide is validation's hot path through a fresh follower: one
// Decide under the read lock, no Redis (the state is swapped in by hand).
func BenchmarkDecide(b *testing.B) {
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
	q := token.LogQuery{JTI: "1", Subject: "alice", Client: "gw", Issued: now.Add(-time.Minute).UnixMilli()}
	b.ReportAllocs()
	for b.Loop() {
		if f.Decide(now, q) != token.LogLive {
			b.Fatal("not live")
		}
	}
}
