package token_test

import (
	"runtime"
	"strconv"
	"testing"

	. "github.com/snowtoken/snowtoken/token"
)

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
	if got := e.svc.CacheLen(); got != n {
		t.Fatalf("the cache holds %d tokens, want %d", got, n)
	}
	full := heap()
	e.svc.EmptyCache()
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
