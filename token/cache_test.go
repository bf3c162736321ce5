package token

import (
	"crypto/sha256"
	"encoding/binary"
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
