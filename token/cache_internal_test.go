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
// empty one does.
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

func TestVerifiedCacheSize(t *testing.T) {
	now := time.Now()
	live := &Verified{cacheUntil: now.Add(time.Hour)}
	for _, size := range []int{1, 2, 5, 31, 32, 33, 64, 100, 1000} {
		c := newVerifiedCache(size)
		for n := range 10*size + 100 {
			k := sha256.Sum256([]byte{byte(n), byte(n >> 8), byte(n >> 16)})
			c.put(&k, live, now)
		}
		if got := c.len(); got > size || got < size/2 {
			t.Errorf("cache of size %d holds %d entries, want at most %[1]d and at least half", size, got)
		}
	}
	for _, size := range []int{0, -1} {
		c := newVerifiedCache(size)
		k := cacheKey(0, 0)
		c.put(&k, live, now)
		if got := c.get(&k, now); got != nil {
			t.Errorf("cache of size %d returned an entry", size)
		}
	}
}

func TestVerifiedCacheExpiry(t *testing.T) {
	now := time.Now()
	c := newVerifiedCache(100)
	soon := &Verified{cacheUntil: now}
	live := &Verified{cacheUntil: now.Add(time.Hour)}
	a, b, d := cacheKey(0, 1), cacheKey(0, 2), cacheKey(0, 3)
	c.put(&a, soon, now.Add(-time.Minute))
	c.put(&b, live, now)
	if got := c.get(&a, now.Add(-time.Second)); got != soon {
		t.Error("get did not return an entry before its expiry")
	}
	if got := c.get(&a, now); got != nil {
		t.Error("get returned an entry at its expiry")
	}
	if got := c.get(&a, now.Add(-time.Second)); got != nil {
		t.Error("an entry read at its expiry was kept")
	}
	c.put(&d, soon, now) // already expired: not kept
	if c.get(&d, now.Add(-time.Second)) != nil || c.get(&b, now) != live {
		t.Error("an expired entry was stored, or a live one lost")
	}
}

// cacheKey returns a key that falls in shard s, numbered n.
func cacheKey(s byte, n int) [sha256.Size]byte {
	var k [sha256.Size]byte
	k[0] = s
	k[1], k[2] = byte(n), byte(n>>8)
	return k
}
