package lease

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// recorder collects OnChange calls.
type recorder struct {
	mu  sync.Mutex
	got []bool
}

func (r *recorder) OnChange(valid bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, valid)
}

// String returns the calls so far, such as "false true".
func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := make([]string, len(r.got))
	for i, v := range r.got {
		s[i] = strconv.FormatBool(v)
	}
	return strings.Join(s, " ")
}

func TestLostAndClaimedAgain(t *testing.T) {
	tests := []struct {
		name    string
		disturb func(ctx context.Context, rdb redis.UniversalClient, leaseKey string) error
		// free, if set, runs after the first failed re-claim and frees the worker.
		free func(ctx context.Context, rdb redis.UniversalClient, leaseKey string) error
	}{
		{
			name: "key deleted",
			disturb: func(ctx context.Context, rdb redis.UniversalClient, k string) error {
				return rdb.Del(ctx, k).Err()
			},
		},
		{
			name: "another owner",
			disturb: func(ctx context.Context, rdb redis.UniversalClient, k string) error {
				return rdb.Set(ctx, k, "someone else", redis.KeepTTL).Err()
			},
			free: func(ctx context.Context, rdb redis.UniversalClient, k string) error {
				// The other owner issued up to a later millisecond and released.
				if err := rdb.HSet(ctx, k+":hw", "ms", ms(t0.Add(time.Hour))).Err(); err != nil {
					return err
				}
				return rdb.Del(ctx, k).Err()
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t)
			var rec recorder
			o := e.opts(3)
			o.OnChange = rec.OnChange
			l := e.acquire(t, o)
			if err := l.renew(ctx, nil); err != nil || !l.Valid() {
				t.Fatalf("first renewal: %v, valid %v", err, l.Valid())
			}
			leaseKey := l.keys[0]
			if err := tt.disturb(ctx, e.rdb, leaseKey); err != nil {
				t.Fatal(err)
			}
			if !l.Valid() {
				t.Fatal("invalid before the renewal noticed")
			}

			err := l.renew(ctx, nil)
			if !errors.Is(err, ErrLost) || l.Valid() || !errors.Is(l.Err(), ErrLost) {
				t.Fatalf("after %s: renew %v, valid %v, Err %v; want ErrLost and invalid", tt.name, err, l.Valid(), l.Err())
			}
			if got := rec.String(); got != "false" {
				t.Fatalf("OnChange calls: got %q, want %q", got, "false")
			}

			wantMark := time.Time{}
			if tt.free != nil {
				if err := l.renew(ctx, nil); !errors.Is(err, ErrLost) || l.Valid() {
					t.Fatalf("re-claim of a held worker: %v, valid %v", err, l.Valid())
				}
				if err := tt.free(ctx, e.rdb, leaseKey); err != nil {
					t.Fatal(err)
				}
				wantMark = time.UnixMilli(t0.Add(time.Hour).UnixMilli()).UTC()
			}
			if err := l.renew(ctx, nil); err != nil || !l.Valid() || l.Err() != nil {
				t.Fatalf("re-claim: %v, valid %v, Err %v", err, l.Valid(), l.Err())
			}
			if got := rec.String(); got != "false true" {
				t.Fatalf("OnChange calls: got %q, want %q", got, "false true")
			}
			if l.WorkerID() != 3 || !l.HighWater().Equal(wantMark) {
				t.Errorf("after re-claim: worker %d, high water %v; want 3, %v", l.WorkerID(), l.HighWater(), wantMark)
			}
			if got, err := e.rdb.Get(ctx, leaseKey).Result(); err != nil || got != l.owner {
				t.Errorf("lease key: got %q, %v; want the owner", got, err)
			}
		})
	}
}

func TestInvalidWithoutRenewalForTTL(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	var rec recorder
	o := e.opts(0)
	o.OnChange = rec.OnChange
	o.TTL = 3 * time.Second
	l := e.acquire(t, o)

	e.clock.Add(o.TTL - time.Millisecond)
	if !l.Valid() || l.Err() != nil {
		t.Fatalf("1ms before the TTL: valid %v, Err %v", l.Valid(), l.Err())
	}
	e.clock.Add(time.Millisecond)
	if l.Valid() || !errors.Is(l.Err(), ErrLost) {
		t.Fatalf("at the TTL, before any renewal: valid %v, Err %v; want invalid and ErrLost", l.Valid(), l.Err())
	}
	if len(rec.got) != 0 {
		t.Fatalf("OnChange called before Run noticed: %v", rec.got)
	}

	// Run notices: the lease is lost even though Redis still has our key...
	if err := l.renew(ctx, nil); !errors.Is(err, ErrLost) || l.Valid() {
		t.Fatalf("renew after the TTL: %v, valid %v", err, l.Valid())
	}
	// ...and claims it again, with a fresh TTL.
	if err := l.renew(ctx, nil); err != nil || !l.Valid() {
		t.Fatalf("re-claim: %v, valid %v", err, l.Valid())
	}
	if got := rec.String(); got != "false true" {
		t.Fatalf("OnChange calls: got %q, want %q", got, "false true")
	}
}

func TestRenewalFailingUntilTTL(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	var rec recorder
	o := e.opts(0)
	o.OnChange = rec.OnChange
	o.TTL = 3 * time.Second
	l := e.acquire(t, o)

	good := l.rdb
	down := redis.NewClient(&redis.Options{
		Dialer: func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("redis is down")
		},
		MaxRetries:         -1,
		DialerRetries:      1,
		DialerRetryBackoff: func(int) time.Duration { return time.Microsecond },
	})
	defer down.Close()
	l.rdb = down // only this goroutine touches l

	for _, step := range []time.Duration{0, time.Second, time.Second, time.Second - time.Millisecond} {
		e.clock.Add(step)
		if err := l.renew(ctx, nil); err == nil || errors.Is(err, ErrLost) {
			t.Fatalf("renewal with Redis down: got %v, want a plain error", err)
		}
		if !l.Valid() {
			t.Fatalf("invalid %v after the last renewal, before the TTL", e.clock.Now().Sub(t0))
		}
	}
	e.clock.Add(time.Millisecond)
	if l.Valid() {
		t.Fatal("valid a TTL after the last renewal")
	}
	if err := l.renew(ctx, nil); !errors.Is(err, ErrLost) {
		t.Fatalf("renew a TTL after the last renewal: got %v, want ErrLost", err)
	}
	if err := l.renew(ctx, nil); err == nil || errors.Is(err, ErrLost) {
		t.Fatalf("re-claim with Redis down: got %v, want a plain error", err)
	}
	l.rdb = good
	if err := l.renew(ctx, nil); err != nil || !l.Valid() {
		t.Fatalf("re-claim with Redis back: %v, valid %v", err, l.Valid())
	}
	if got := rec.String(); got != "false true" {
		t.Fatalf("OnChange calls: got %q, want %q", got, "false true")
	}
}

func TestReleaseByNonOwner(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	a := e.acquire(t, e.opts(2))
	if err := a.renew(ctx, func() time.Time { return t0 }); err != nil {
		t.Fatal(err)
	}
	// a's lease expires and b takes the worker.
	if err := e.rdb.Del(ctx, a.keys[0]).Err(); err != nil {
		t.Fatal(err)
	}
	b := e.acquire(t, e.opts(2))
	if b.WorkerID() != 2 {
		t.Fatalf("b took worker %d, want 2", b.WorkerID())
	}
	before, err := e.rdb.HGetAll(ctx, a.keys[1]).Result()
	if err != nil {
		t.Fatal(err)
	}

	if err := a.Release(ctx, t0.Add(time.Hour)); err != nil {
		t.Fatalf("Release by a non-owner: %v", err)
	}
	if got, err := e.rdb.Get(ctx, b.keys[0]).Result(); err != nil || got != b.owner {
		t.Errorf("lease key after a non-owner's Release: got %q, %v; want b's owner", got, err)
	}
	after, err := e.rdb.HGetAll(ctx, a.keys[1]).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) || after["ms"] != before["ms"] || after["until"] != before["until"] || after["owner"] != b.owner {
		t.Errorf("high-water hash changed by a non-owner's Release: before %v, after %v", before, after)
	}
	if err := b.renew(ctx, nil); err != nil || !b.Valid() {
		t.Errorf("b after a's Release: %v, valid %v", err, b.Valid())
	}
}

func TestFence(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	a := e.acquire(t, e.opts(9))
	e.clock.Add(3 * time.Second)
	renewedAt := e.clock.Now()
	if err := a.renew(ctx, func() time.Time { return renewedAt }); err != nil {
		t.Fatal(err)
	}
	// a may issue until renewedAt+TTL. Its key vanishes without a Release (an
	// operator deletes it, or Redis expires it early).
	if err := e.rdb.Del(ctx, a.keys[0]).Err(); err != nil {
		t.Fatal(err)
	}

	t.Run("own until is not a fence", func(t *testing.T) {
		if err := a.renew(ctx, nil); !errors.Is(err, ErrLost) {
			t.Fatalf("got %v, want ErrLost", err)
		}
		if err := a.renew(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if want := renewedAt.Truncate(time.Millisecond); !a.HighWater().Equal(want) {
			t.Errorf("high water: got %v, want the saved mark %v", a.HighWater(), want)
		}
		if err := e.rdb.Del(ctx, a.keys[0]).Err(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("another holder waits for the until", func(t *testing.T) {
		b := e.acquire(t, e.opts(9))
		want := renewedAt.Add(DefaultTTL).Truncate(time.Millisecond).Add(time.Millisecond) // rounded up
		if b.WorkerID() != 9 || !b.HighWater().Equal(want) {
			t.Fatalf("b: worker %d, high water %v; want 9, a's lease end %v", b.WorkerID(), b.HighWater(), want)
		}
		// The fence becomes the saved mark; b's own until replaces a's.
		if got := e.savedMark(t, 9); got != ms(want) {
			t.Errorf("saved mark: got %s, want %s", got, ms(want))
		}
		if err := b.Release(ctx, time.Time{}); err != nil {
			t.Fatal(err)
		}
		c := e.acquire(t, e.opts(9))
		if !c.HighWater().Equal(want) {
			t.Errorf("after a clean release: high water %v, want %v", c.HighWater(), want)
		}
	})
}

// TestRun runs the real loop with short times; it waits for events, never for
// a time.
func TestRun(t *testing.T) {
	e := newEnv(t)
	changes := make(chan bool, 16)
	o := e.opts(4)
	o.Now = nil // Run's timers are real
	o.TTL, o.RenewEvery = 2*time.Second, 20*time.Millisecond
	o.OnChange = func(valid bool) { changes <- valid }
	l := e.acquire(t, o)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mark := time.Now().Add(-time.Minute)
	var armed atomic.Bool
	marks := make(chan struct{}) // while armed: a renewal is about to save the mark
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx, func() time.Time {
			if armed.Load() {
				select {
				case marks <- struct{}{}:
				case <-ctx.Done():
				}
			}
			return mark
		})
	}()
	stopReaders := make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(1)
	go func() { // concurrent readers, for the race detector
		defer readers.Done()
		for {
			select {
			case <-stopReaders:
				return
			default:
				_, _, _, _ = l.Valid(), l.Err(), l.HighWater(), l.WorkerID()
			}
		}
	}()
	defer func() { close(stopReaders); readers.Wait() }()

	wait := func(want bool) {
		t.Helper()
		select {
		case got := <-changes:
			if got != want {
				t.Fatalf("OnChange(%v), want OnChange(%v)", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no OnChange(%v)", want)
		}
	}
	bg := context.Background()
	if err := e.rdb.Del(bg, l.keys[0]).Err(); err != nil {
		t.Fatal(err)
	}
	wait(false)
	wait(true)
	if !l.Valid() {
		t.Fatal("invalid after OnChange(true)")
	}
	// Renewals save the mark: once a second renewal after the re-claim has
	// begun, the first has finished.
	armed.Store(true)
	<-marks
	<-marks
	armed.Store(false)
	if got := e.savedMark(t, 4); got != ms(mark) {
		t.Fatalf("saved mark: got %q, want %s", got, ms(mark))
	}

	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after ctx ended")
	}
	if err := l.Release(bg, mark); err != nil {
		t.Fatal(err)
	}

	t.Run("returns after Release", func(t *testing.T) {
		l := e.acquire(t, o)
		done := make(chan struct{})
		go func() {
			defer close(done)
			l.Run(context.Background(), nil)
		}()
		if err := l.Release(bg, time.Time{}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after Release")
		}
		if len(changes) != 0 {
			t.Errorf("OnChange called for Release: %v", <-changes)
		}
	})
}

// TestExpires: Expires is the last successful renewal's send time plus the
// TTL, moves with each renewal, and is zero once the lease is lost and
// after Release.
func TestExpires(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	o := e.opts(0)
	o.TTL = 3 * time.Second
	l := e.acquire(t, o)
	if got, want := l.Expires(), t0.Add(o.TTL); !got.Equal(want) || l.TTL() != o.TTL {
		t.Fatalf("after Acquire: Expires %v, TTL %v; want %v, %v", got, l.TTL(), want, o.TTL)
	}
	e.clock.Add(time.Second)
	if err := l.renew(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := l.Expires(), t0.Add(time.Second+o.TTL); !got.Equal(want) {
		t.Fatalf("after a renewal: Expires %v, want %v", got, want)
	}
	e.clock.Add(o.TTL)
	if err := l.renew(ctx, nil); !errors.Is(err, ErrLost) {
		t.Fatalf("renew a TTL after the last renewal: %v, want ErrLost", err)
	}
	if got := l.Expires(); !got.IsZero() {
		t.Fatalf("lost: Expires %v, want zero", got)
	}
	if err := l.renew(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := l.Expires(), e.clock.Now().Add(o.TTL); !got.Equal(want) {
		t.Fatalf("claimed again: Expires %v, want %v", got, want)
	}
	if err := l.Release(ctx, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got := l.Expires(); !got.IsZero() {
		t.Fatalf("released: Expires %v, want zero", got)
	}
}
