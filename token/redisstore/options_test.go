package redisstore

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestOptionsNegative: a negative duration is ErrOptions, from Check and
// New; zero is the default.
func TestOptionsNegative(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rdb.Close()
	for _, o := range []Options{{Timeout: -time.Second}, {LogRetention: -1}, {Leeway: -time.Millisecond}} {
		if err := o.Check(); !errors.Is(err, ErrOptions) {
			t.Errorf("Check(%+v) = %v, want ErrOptions", o, err)
		}
		if s, err := New(rdb, o); s != nil || !errors.Is(err, ErrOptions) {
			t.Errorf("New(%+v) = %v, %v; want ErrOptions", o, s, err)
		}
	}
	s, err := New(rdb, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.prefix != DefaultKeyPrefix || s.leeway <= 0 || s.logRetention <= 0 {
		t.Errorf("New(zero): prefix %q, leeway %v, log retention %v; want the defaults", s.prefix, s.leeway, s.logRetention)
	}
}
