package token

import (
	"crypto/sha256"
	"encoding/binary"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// BenchmarkVerifiedCache measures the cache at the default size, empty and
// full of live entries: a put of a new token and a get of a cached one, from
// as many goroutines as GOMAXPROCS. A full cache must cost about what an
// empty one does (issue 19).
func BenchmarkVerifiedCache(b *testing.B) {
	now := time.Now()
	live := &Verified{cacheUntil: now.Add(time.Hour)}
	key := func(n uint64) [sha256.Size]byte {
		var raw [8]byte
		binary.LittleEndian.PutUint64(raw[:], n)
		return sha256.Sum256(raw[:])
	}
	for _, fill := range []struct {
		name string
		n    int
	}{{"empty", 0}, {"full", DefaultCacheSize}} {
		c := newVerifiedCache(DefaultCacheSize)
		for i := range fill.n {
			k := key(uint64(i))
			c.put(&k, live, now)
		}
		b.Run("put/"+fill.name, func(b *testing.B) {
			var next uint64 = 1 << 40
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					k := key(next + uint64(time.Now().UnixNano()))
					c.put(&k, live, now)
				}
			})
		})
		hot := key(1 << 50)
		c.put(&hot, live, now)
		b.Run("get/"+fill.name, func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if c.get(&hot, now) == nil {
						b.Fatal("a cached entry is gone")
					}
				}
			})
		})
	}
}

// TestVerifiedCacheMemory measures what one cached token costs the heap:
// tokens issued for distinct subjects, each validated once (a cache entry
// each), the heap compared full and emptied; JWTs, and opaque tokens, which
// are cached with their claims when there is a revocation log. The figure
// must stay within CacheEntryBytes, the bound the issuer sizes the cache
// against its memory limit with.
func TestVerifiedCacheMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("issues 20,000 tokens")
	}
	for _, c := range []struct {
		format, client string
		opts           Options
	}{
		{FormatJWT, "gateway", Options{}},
		{FormatOpaque, "ogateway", Options{Revocations: liveLog{}}},
	} {
		t.Run(c.format, func(t *testing.T) { measureCache(t, c.client, c.opts) })
	}
}

// measureCache is TestVerifiedCacheMemory for the tokens of client.
func measureCache(t *testing.T, client string, opts Options) {
	const n = 20_000
	e := newEnv(t, opts)
	gateway := e.clients[client]
	toks := make([]string, n)
	for i := range toks {
		iss, err := e.svc.Issue(t.Context(), gateway, IssueRequest{Subject: "user-" + strconv.Itoa(i)})
		if err != nil {
			t.Fatal(err)
		}
		toks[i] = iss.AccessToken
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for _, raw := range toks {
		mustValidate(t, e.svc, raw)
	}
	if got := e.svc.cache.len(); got != n {
		t.Fatalf("the cache holds %d tokens, want %d", got, n)
	}
	full := heap()
	e.svc.cache.c.InvalidateAll()
	e.svc.cache.c.CleanUp()
	empty := heap()
	per := float64(full-empty) / n
	t.Logf("heap per cached token: %.0f bytes (%d tokens); at the default %d entries: %.1f MiB",
		per, n, DefaultCacheSize, per*DefaultCacheSize/(1<<20))
	// CacheEntryBytes is what the issuer checks against the memory limit
	// at start (memory.go) and what the README promises.
	if per > CacheEntryBytes {
		t.Errorf("a cached token costs %.0f bytes of heap, over CacheEntryBytes (%d)", per, CacheEntryBytes)
	}
	runtime.KeepAlive(toks)
}
