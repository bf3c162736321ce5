package authlimit_test

import (
	"errors"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/authlimit"
	"github.com/snowtoken/snowtoken/internal/clocktest"
	"github.com/snowtoken/snowtoken/internal/redistest"
)

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client
	for _, s := range []authlimit.Settings{
		{Failures: -1},
		{Window: time.Millisecond},
		{Failures: 3, Window: -time.Minute},
	} {
		if _, err := authlimit.New(rdb, s); err == nil {
			t.Errorf("New(%+v): no error", s)
		}
	}
}

// TestFailBlockedReport: a key fails Failures times, then is limited; the
// process refuses it from memory until Redis's wait has passed on its clock;
// only the first refusal of a window is to be reported, and the first of the
// next; another key is not affected.
func TestFailBlockedReport(t *testing.T) {
	t.Parallel()
	srv := redistest.NewServer(t)
	clock := clocktest.New(time.Now())
	l, err := authlimit.New(srv.Client(), authlimit.Settings{Failures: 3, Window: time.Hour, Prefix: "t:", Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	victim := authlimit.Key{Kind: authlimit.Client, Name: "svc"}
	other := authlimit.Key{Kind: authlimit.Address, Name: "192.0.2.1"}
	for i := range 3 {
		if err := l.Fail(ctx, victim); err != nil {
			t.Fatalf("failure %d: %v, want none limited yet", i+1, err)
		}
	}
	var le *authlimit.LimitedError
	if err := l.Fail(ctx, victim); !errors.As(err, &le) || le.Key != victim || !le.Report {
		t.Fatalf("failure 4: %v, want a reported *LimitedError for %v", err, victim)
	}
	if le.Wait <= 0 || le.Wait > 20*time.Minute {
		t.Errorf("Wait %v, want up to Window/Failures", le.Wait)
	}
	if err := l.Blocked(other, victim); !errors.Is(err, authlimit.ErrLimited) {
		t.Errorf("Blocked: %v, want ErrLimited", err)
	}
	if err := l.Blocked(other); err != nil {
		t.Errorf("Blocked(other): %v, want nil", err)
	}
	if err := l.Fail(ctx, victim); !errors.As(err, &le) || le.Report {
		t.Errorf("failure 5: %v (report %t), want limited, not reported again in the window", err, le != nil && le.Report)
	}
	clock.Add(le.Wait + time.Millisecond)
	if err := l.Blocked(victim); err != nil {
		t.Errorf("Blocked after the wait: %v, want nil", err)
	}
	// A window after the report, the next refusal is reported again. (Redis
	// keeps its own time, and still finds the key limited.)
	clock.Add(time.Hour)
	if err := l.Fail(ctx, victim); !errors.As(err, &le) || !le.Report {
		t.Errorf("a failure a window later: %v, want a reported *LimitedError", err)
	}
}

// TestFailRemembersEveryLimitedKey: when a failure limits a client ID and
// an address at once, both are refused from memory afterwards, not only the
// one the error names.
func TestFailRemembersEveryLimitedKey(t *testing.T) {
	t.Parallel()
	l, err := authlimit.New(redistest.NewServer(t).Client(), authlimit.Settings{Failures: 2})
	if err != nil {
		t.Fatal(err)
	}
	id := authlimit.Key{Kind: authlimit.Client, Name: "svc"}
	addr := authlimit.Key{Kind: authlimit.Address, Name: "192.0.2.7"}
	var err3 error
	for range 3 {
		err3 = l.Fail(t.Context(), id, addr)
	}
	var le *authlimit.LimitedError
	if !errors.As(err3, &le) || !le.Report {
		t.Fatalf("third failure: %v, want a reported *LimitedError", err3)
	}
	for _, k := range []authlimit.Key{id, addr} {
		if err := l.Blocked(k); !errors.Is(err, authlimit.ErrLimited) {
			t.Errorf("Blocked(%v): %v, want ErrLimited", k, err)
		}
	}
}
