package redisstore_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/dpop"
	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/token/clientauth"
	"github.com/snowtoken/snowtoken/token/redisstore"
)

// The Store is the record of accepted DPoP proofs that every replica shares.
var _ dpop.ReplayCache = (*redisstore.Replays)(nil)

// ... and of accepted client assertions.
var _ clientauth.ReplayCache = (*redisstore.Replays)(nil)

// TestReplaysApart: a DPoP proof and a client assertion with the same ID
// are two records, each under its own prefix.
func TestReplaysApart(t *testing.T) {
	r := redistest.New(t)
	s, err := redisstore.New(r.Client, redisstore.Options{Prefix: r.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	now := time.Unix(1_800_000_000, 0)
	for _, rec := range []*redisstore.Replays{s.Proofs(), s.Assertions()} {
		if seen, err := rec.Seen(t.Context(), "same-id", now, now.Add(time.Minute)); err != nil || seen {
			t.Fatalf("Seen: %v, %v; want a first record", seen, err)
		}
	}
	for _, key := range []string{"dpop:same-id", "assertion:same-id"} {
		if n, err := r.Client.Exists(t.Context(), r.Prefix+key).Result(); err != nil || n != 1 {
			t.Errorf("%s%s: exists %d (%v)", r.Prefix, key, n, err)
		}
	}
}

// TestProofsSeen: a proof's ID is recorded once, across replicas (two Stores
// on one Redis), and of concurrent proofs with the same ID exactly one
// passes; the record lasts until until, by the checker's clock, plus the
// store's leeway, and then goes.
func TestProofsSeen(t *testing.T) {
	r := redistest.New(t)
	a, err := redisstore.New(r.Client, redisstore.Options{Prefix: r.Prefix, Leeway: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b, err := redisstore.New(r.Client, redisstore.Options{Prefix: r.Prefix, Leeway: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	now := time.Unix(1_800_000_000, 0) // the checker's clock, whatever Redis's says
	const id = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFG"
	if seen, err := a.Proofs().Seen(t.Context(), id, now, now.Add(time.Minute)); err != nil || seen {
		t.Fatalf("first Seen: %v, %v; want not seen", seen, err)
	}
	if seen, err := b.Proofs().Seen(t.Context(), id, now, now.Add(time.Minute)); err != nil || !seen {
		t.Fatalf("the same ID at another replica: %v, %v; want seen", seen, err)
	}
	ttl, err := r.Client.PTTL(t.Context(), r.Prefix+"dpop:"+id).Result()
	if err != nil || ttl <= 55*time.Second || ttl > time.Minute+time.Second {
		t.Errorf("the record's TTL %v (%v), want the minute to until plus the leeway", ttl, err)
	}

	var passed atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			if seen, err := a.Proofs().Seen(t.Context(), "concurrent-"+id[:32], now, now.Add(time.Minute)); err == nil && !seen {
				passed.Add(1)
			}
		})
	}
	wg.Wait()
	if passed.Load() != 1 {
		t.Errorf("%d of 32 concurrent proofs with one ID passed, want 1", passed.Load())
	}

	// until already past on the checker's clock: kept for the leeway only.
	if seen, err := a.Proofs().Seen(t.Context(), "late-"+id[:32], now, now.Add(-time.Hour)); err != nil || seen {
		t.Fatalf("Seen past until: %v, %v", seen, err)
	}
	ttl, err = r.Client.PTTL(t.Context(), r.Prefix+"dpop:late-"+id[:32]).Result()
	if err != nil || ttl <= 0 || ttl > time.Second {
		t.Errorf("a record past its until: TTL %v (%v), want the leeway at most", ttl, err)
	}
}
