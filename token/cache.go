package token

import (
	"crypto/sha256"
	"sync"
	"time"
)

// verifiedCache remembers tokens whose signature and claims have been checked,
// keyed by the SHA-256 of the whole token, until they expire. It never holds a
// token itself. When a shard is full an arbitrary entry makes room.
type verifiedCache struct {
	shards   [cacheShards]cacheShard
	nShards  int // shards in use: fewer than cacheShards when size is smaller
	perShard int
}

const cacheShards = 32

type cacheShard struct {
	mu sync.RWMutex
	m  map[[sha256.Size]byte]*Verified
}

func newVerifiedCache(size int) *verifiedCache {
	if size <= 0 {
		return nil
	}
	n := min(size, cacheShards)
	c := &verifiedCache{nShards: n, perShard: size / n}
	for i := range c.shards[:n] {
		c.shards[i].m = make(map[[sha256.Size]byte]*Verified)
	}
	return c
}

func (c *verifiedCache) shard(key *[sha256.Size]byte) *cacheShard {
	return &c.shards[int(key[0])%c.nShards]
}

// get returns the entry for key if it is still within until (its expiry plus leeway).
func (c *verifiedCache) get(key *[sha256.Size]byte, now time.Time) *Verified {
	if c == nil {
		return nil
	}
	s := c.shard(key)
	s.mu.RLock()
	v := s.m[*key]
	s.mu.RUnlock()
	if v == nil || !now.Before(v.cacheUntil) {
		return nil
	}
	return v
}

func (c *verifiedCache) put(key *[sha256.Size]byte, v *Verified, now time.Time) {
	if c == nil {
		return
	}
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= c.perShard {
		for k, old := range s.m { // drop the expired first, else any one
			if !now.Before(old.cacheUntil) {
				delete(s.m, k)
			}
		}
		for k := range s.m {
			if len(s.m) < c.perShard {
				break
			}
			delete(s.m, k)
		}
	}
	s.m[*key] = v
}
