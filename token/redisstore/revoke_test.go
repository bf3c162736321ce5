package redisstore

import (
	"strconv"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/token"
)

// TestRevokeTokenDedupeLifetime: the dedupe key never outlives the entry
// (at most the log's retention: an exp far off, or none); a token past
// three leeways after its exp by Redis's clock validates nowhere and is not
// logged, though its record is deleted.
func TestRevokeTokenDedupeLifetime(t *testing.T) {
	forPaths(t, func(t *testing.T, r *redistest.Redis, s *Store) {
		ctx := t.Context()
		retention := s.LogRetention()
		now := time.Now()
		for _, c := range []struct {
			name string
			exp  int64
			log  bool
		}{
			{"exp unknown", 0, true},
			{"exp beyond the retention", now.Add(2 * retention).Unix(), true},
			{"expired long ago", now.Add(-time.Hour).Unix(), false},
		} {
			jti := strconv.Itoa(len(c.name))
			key := r.Prefix + "{bob}:" + jti
			if err := r.Client.Set(ctx, key, "m", time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			before := r.Client.XLen(ctx, s.LogKey()).Val()
			if err := s.RevokeToken(ctx, token.SessionRef{JTI: jti, Subject: "bob"}, c.exp); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if got := r.Client.XLen(ctx, s.LogKey()).Val() - before; got != map[bool]int64{true: 1, false: 0}[c.log] {
				t.Errorf("%s: %d entries appended, want logged %v", c.name, got, c.log)
			}
			if r.Client.Exists(ctx, key).Val() != 0 {
				t.Errorf("%s: record not deleted", c.name)
			}
			ttl := r.Client.PTTL(ctx, s.LogKey()+":r:"+jti).Val()
			switch {
			case !c.log && ttl != -2*time.Nanosecond && ttl != -2*time.Millisecond:
				t.Errorf("%s: dedupe key written (PTTL %v)", c.name, ttl)
			case c.log && (ttl <= retention-time.Minute || ttl > retention):
				t.Errorf("%s: dedupe key PTTL %v, want the retention %v", c.name, ttl, retention)
			}
		}
	})
}
