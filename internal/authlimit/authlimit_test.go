package authlimit_test

import (
	"errors"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/internal/authlimit"
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
		{IPv4Prefix: 15},
		{IPv4Prefix: 33},
		{IPv4Prefix: -1},
		{IPv6Prefix: 31},
		{IPv6Prefix: 129},
		{IPv6Prefix: -64},
	} {
		if _, err := authlimit.New(rdb, s); !errors.Is(err, authlimit.ErrSettings) {
			t.Errorf("New(%+v): %v, want ErrSettings", s, err)
		}
	}
	for _, s := range []authlimit.Settings{
		{IPv4Prefix: 16, IPv6Prefix: 32},
		{IPv4Prefix: 32, IPv6Prefix: 128},
	} {
		if _, err := authlimit.New(rdb, s); err != nil {
			t.Errorf("New(%+v): %v, want a limiter", s, err)
		}
	}
}

// TestAddressNetworks: an address counts as its network, whatever its
// spelling: a limited address limits every address of its network, and
// only those. An IPv4-mapped IPv6 address is its IPv4 address.
func TestAddressNetworks(t *testing.T) {
	t.Parallel()
	srv := redistest.NewServer(t)
	for _, tc := range []struct {
		name           string
		ipv4, ipv6     int // Settings
		limited, other string
		same           bool
		network        string // the Key a LimitedError names
	}{
		{"IPv6 /64 by default", 0, 0, "2001:db8:1::1", "2001:db8:1:0:ffff:ffff:ffff:ffff", true, "2001:db8:1::/64"},
		{"the next /64", 0, 0, "2001:db8:2::1", "2001:db8:2:1::1", false, "2001:db8:2::/64"},
		{"another spelling", 0, 0, "2001:DB8:3:0:0::1", "2001:db8:3::2", true, "2001:db8:3::/64"},
		{"a zone", 0, 0, "fe80::1%eth0", "fe80::2", true, "fe80::/64"},
		{"IPv4 /32 by default", 0, 0, "192.0.2.1", "192.0.2.2", false, "192.0.2.1/32"},
		{"IPv4-mapped is IPv4", 0, 0, "::ffff:192.0.2.3", "192.0.2.3", true, "192.0.2.3/32"},
		{"IPv4 is IPv4-mapped", 0, 0, "192.0.2.4", "::ffff:c000:204", true, "192.0.2.4/32"},
		{"IPv4 /24", 24, 0, "198.51.100.1", "198.51.100.254", true, "198.51.100.0/24"},
		{"IPv4 /24, another /24", 24, 0, "198.51.101.1", "198.51.102.1", false, "198.51.101.0/24"},
		{"IPv6 /128", 0, 128, "2001:db8:4::1", "2001:db8:4::2", false, "2001:db8:4::1/128"},
		{"IPv6 /48", 0, 48, "2001:db8:5:1::1", "2001:db8:5:ff::1", true, "2001:db8:5::/48"},
		{"not an address: its own key", 0, 0, "unix", "unix", true, "unix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := authlimit.New(srv.Client(), authlimit.Settings{Failures: 1, Window: time.Hour, Prefix: "networks:" + tc.name + ":",
				IPv4Prefix: tc.ipv4, IPv6Prefix: tc.ipv6})
			if err != nil {
				t.Fatal(err)
			}
			key := authlimit.Key{Kind: authlimit.Address, Name: tc.limited}
			var le *authlimit.LimitedError
			if err := l.Fail(t.Context(), key); err != nil {
				t.Fatalf("the first failure: %v", err)
			}
			if err := l.Fail(t.Context(), key); !errors.As(err, &le) {
				t.Fatalf("the second failure: %v, want a *LimitedError", err)
			}
			if want := (authlimit.Key{Kind: authlimit.Address, Name: tc.network}); le.Key != want {
				t.Errorf("LimitedError.Key %v, want %v", le.Key, want)
			}
			other := authlimit.Key{Kind: authlimit.Address, Name: tc.other}
			if err := l.Blocked(other); (err != nil) != tc.same {
				t.Errorf("Blocked(%s) after %s was limited: %v, want limited %t", tc.other, tc.limited, err, tc.same)
			}
			// Redis agrees: the other address's failure counts against the same key, or not.
			err = l.Fail(t.Context(), other)
			if got := errors.Is(err, authlimit.ErrLimited); got != tc.same {
				t.Errorf("Fail(%s): %v, want limited %t", tc.other, err, tc.same)
			}
		})
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
