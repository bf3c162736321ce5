package token

import (
	"crypto/sha256"
	"time"

	"github.com/maypok86/otter/v2"
)

// verifiedCache remembers tokens whose signature and claims have been checked,
// keyed by the SHA-256 of the whole token, until they expire. It never holds a
// token itself.
//
// It is an otter cache (S3-FIFO/W-TinyLFU family): insert and eviction are
// O(1), and reads take no lock that a writer holds, so a full cache costs
// what an empty one does (BenchmarkVerifiedCache: a put into a full cache of
// 100,000 took 38.9 µs with the sharded maps this replaced, which scanned a
// whole shard under its write lock). At most size entries, at most
// CacheEntryBytes of heap each with their Verified (TestVerifiedCacheMemory):
// 75 MiB at the default 100,000.
type verifiedCache struct {
	c *otter.Cache[[sha256.Size]byte, *Verified]
}

func newVerifiedCache(size int) *verifiedCache {
	if size <= 0 {
		return nil
	}
	return &verifiedCache{c: otter.Must(&otter.Options[[sha256.Size]byte, *Verified]{MaximumSize: size})}
}

// get returns the entry for key if it is still within until (its expiry plus
// leeway), by the caller's clock; an entry past it is dropped.
func (c *verifiedCache) get(key *[sha256.Size]byte, now time.Time) *Verified {
	if c == nil {
		return nil
	}
	v, ok := c.c.GetIfPresent(*key)
	if !ok {
		return nil
	}
	if !now.Before(v.cacheUntil) {
		c.c.Invalidate(*key)
		return nil
	}
	return v
}

// put remembers v under key until v's cacheUntil. The cache makes room by
// its own policy: entries not read again go first, and an expired entry is
// never read again.
func (c *verifiedCache) put(key *[sha256.Size]byte, v *Verified, now time.Time) {
	if c == nil || !now.Before(v.cacheUntil) {
		return
	}
	c.c.Set(*key, v)
}

// len is how many entries the cache holds, after pending maintenance.
func (c *verifiedCache) len() int {
	c.c.CleanUp()
	return c.c.EstimatedSize()
}
